"""The one chat path: protocol requests become neutral chat turns, run on the shared models.

``service`` (``ChatService``: prepare, run, commit), ``prompting`` (fresh, rebuilt or
forked prompts), ``continuation`` (loading a stored conversation), ``items``
(Responses-style items and tools to neutral messages), ``media`` (images and audio in
messages) and ``models`` (``ModelHub``: each served model with its chat codec).
"""
