"""Hand-written prompts and teacher-forced continuations for the SmolLM2 suite.

Each prompt is a ``(kind, user_message, assistant_continuation)`` triple.  The
generator formats it with the model's chat template (SmolLM2-135M-Instruct is a
chat model) and takes next-token distributions at positions that predict
tokens of the assistant continuation.
"""

from __future__ import annotations

from typing import NamedTuple


class Prompt(NamedTuple):
    """One teacher-forced prompt: the user turn and the assistant reply."""

    kind: str
    user: str
    continuation: str


PROMPTS: tuple[Prompt, ...] = (
    # --- math word problems -------------------------------------------------
    Prompt(
        "math",
        "Tom has 12 apples. He gives 5 apples to his sister and then buys 8 "
        "more. How many apples does Tom have now?",
        "Tom starts with 12 apples. After giving 5 to his sister he has "
        "12 - 5 = 7 apples. Then he buys 8 more, so he has 7 + 8 = 15 apples. "
        "The answer is 15.",
    ),
    Prompt(
        "math",
        "A train travels at 60 miles per hour for 3 hours and then at 40 "
        "miles per hour for 2 hours. How far does it travel in total?",
        "In the first part the train covers 60 * 3 = 180 miles. In the second "
        "part it covers 40 * 2 = 80 miles. The total distance is "
        "180 + 80 = 260 miles.",
    ),
    Prompt(
        "math",
        "A shirt costs $25 and is on sale for 20% off. What is the sale price?",
        "The discount is 20% of $25, which is 0.20 * 25 = $5. The sale price "
        "is the original price minus the discount: 25 - 5 = $20. So the shirt "
        "costs $20 on sale.",
    ),
    # --- code ---------------------------------------------------------------
    Prompt(
        "code",
        "Write a Python function that returns the factorial of a number.",
        "Here is a simple recursive implementation:\n\n```python\n"
        "def factorial(n):\n    if n <= 1:\n        return 1\n"
        "    return n * factorial(n - 1)\n```\n\n"
        "For example, factorial(5) returns 120.",
    ),
    Prompt(
        "code",
        "Write a Python function that checks whether a string is a palindrome.",
        "```python\ndef is_palindrome(s):\n"
        "    cleaned = ''.join(c.lower() for c in s if c.isalnum())\n"
        "    return cleaned == cleaned[::-1]\n```\n\n"
        "The function ignores case and punctuation before comparing the "
        "string with its reverse.",
    ),
    Prompt(
        "code",
        "How do I read a CSV file into a list of dictionaries in Python?",
        "You can use the csv module from the standard library:\n\n```python\n"
        "import csv\n\nwith open('data.csv', newline='') as f:\n"
        "    reader = csv.DictReader(f)\n    rows = list(reader)\n```\n\n"
        "Each row is a dictionary keyed by the column names.",
    ),
    # --- prose --------------------------------------------------------------
    Prompt(
        "prose",
        "Write a short story about a lighthouse keeper.",
        "Every night for forty years, Elias climbed the spiral stairs of the "
        "old lighthouse and lit the great lamp. The sea was his only "
        "companion, and he knew its moods better than he knew his own. One "
        "stormy evening, he saw a small boat struggling against the waves.",
    ),
    Prompt(
        "prose",
        "Describe a walk through a forest in autumn.",
        "The path was covered in a thick carpet of red and golden leaves that "
        "crunched softly under my feet. Sunlight filtered through the "
        "branches, and the cool air smelled of damp earth and pine. A "
        "squirrel darted across the trail, carrying an acorn.",
    ),
    Prompt(
        "prose",
        "Write a paragraph about the history of the printing press.",
        "The printing press was invented by Johannes Gutenberg around 1440 in "
        "Mainz, Germany. His use of movable metal type made it possible to "
        "produce books quickly and cheaply. Within a few decades, printing "
        "spread across Europe and helped fuel the Renaissance.",
    ),
    # --- instructions -------------------------------------------------------
    Prompt(
        "instructions",
        "How do I make a cup of tea?",
        "1. Boil fresh water in a kettle.\n2. Place a tea bag in your cup.\n"
        "3. Pour the hot water over the tea bag.\n4. Let it steep for three "
        "to five minutes.\n5. Remove the tea bag and add milk or sugar if "
        "you like.",
    ),
    Prompt(
        "instructions",
        "Give me tips for getting better sleep.",
        "Here are some tips for better sleep:\n\n- Go to bed and wake up at "
        "the same time every day.\n- Avoid caffeine in the afternoon and "
        "evening.\n- Keep your bedroom cool, dark and quiet.\n- Put away "
        "screens at least an hour before bed.",
    ),
    Prompt(
        "instructions",
        "How do I change a flat tire on a car?",
        "First, park the car on a flat surface and turn on the hazard lights. "
        "Loosen the lug nuts slightly with a wrench, then use the jack to "
        "lift the car. Remove the lug nuts and the flat tire, put on the "
        "spare, and tighten the nuts by hand.",
    ),
)
