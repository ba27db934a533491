"""Nothing yet."""
print("hi")
