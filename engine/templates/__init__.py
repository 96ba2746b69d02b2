"""A model's chat template: rendering it in a budgeted sandbox, and turning messages into prompt tokens."""
