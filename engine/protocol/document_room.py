"""The room a document leaves in a context: what the worker and a remote engine both keep free
when they say how many tokens a document may have (``MeasureText``'s default budget)."""

ANSWER_ROOM = 1024  # tokens a document leaves free for the questions and answers after it; an answer's most
TEMPLATE_ROOM = 64  # the chat template's tokens around a document
