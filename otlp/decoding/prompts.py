"""The built-in prompt sets of ``otlp decode``: free text, and input-grounded prompts.

* ``free`` — open-ended requests (a story, an explanation, a list): the answer is new text, so
  a draft has to predict the model, and prompt lookup finds little to copy.
* ``grounded`` — the answer copies from the input: extract fields from a given record,
  correct or rewrite a given text, edit a given code snippet. These are the workloads
  prompt-lookup drafting is for (retrieval drafts, [GBV] §1): most output tokens continue an
  n-gram that already occurs in the context.
* ``both`` — the two sets, free first.
"""

from __future__ import annotations

FREE_PROMPTS = (
    "Write a short story about a robot who learns to paint.",
    "Explain how a bicycle works to a ten-year-old.",
    "List five tips for staying productive when working from home, with a sentence on each.",
    "Describe the water cycle step by step.",
)

GROUNDED_PROMPTS = (
    "Extract the name, email, phone number and city from this record, one field per line as "
    "'field: value'.\n\nRecord: Maria Lopez joined the Riverside chapter in March. You can "
    "reach her at maria.lopez@example.org or on 555-0142. She lives in Springfield, Oregon, "
    "and volunteers at the public library on Saturdays.",
    "Correct the spelling mistakes in this paragraph and return the whole corrected "
    "paragraph.\n\nThe comittee will meet on Tuesday to discus the new budjet. Every member "
    "should bring there notes from the last meeting, and the secretary will send the agenda "
    "by email before the end of the weak.",
    "Rewrite this text in the past tense, changing nothing else.\n\nThe train leaves the "
    "station at seven. Anna sits by the window and watches the fields go by. She opens her "
    "book, reads a few pages, and then falls asleep until the conductor calls her stop.",
    "Rename the variable `x` to `total` in this Python function and return the whole "
    "function.\n\n```python\ndef add_prices(prices):\n    x = 0\n    for price in prices:\n"
    "        x = x + price\n    return x\n```",
    "Add a docstring to this Python function and return the whole function.\n\n```python\n"
    "def average(values):\n    if not values:\n        return 0.0\n    return sum(values) / "
    "len(values)\n```",
    "Convert this list into a Markdown table with the columns Product, Price and Stock.\n\n"
    "- Apples, 1.20, 50\n- Bananas, 0.50, 120\n- Cherries, 4.00, 15\n- Dates, 3.50, 40",
    "Copy the following address exactly, then write the city and the postal code on separate "
    "lines.\n\nAddress: 221 Baker Street, Flat 2, London, NW1 6XE, United Kingdom",
    "Fix the grammar in these sentences and return them in the same order.\n\n1. She don't "
    "like coffee in the morning.\n2. The dogs was barking all night.\n3. We has finished the "
    "report yesterday.\n4. He go to school by bus every day.",
)

PROMPT_SETS = {
    "free": FREE_PROMPTS,
    "grounded": GROUNDED_PROMPTS,
    "both": FREE_PROMPTS + GROUNDED_PROMPTS,
}
