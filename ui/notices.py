"""Why a notice is in the banner, so it can go by itself when that reason is gone.

A notice about a passing state names its *cause*; when the cause is gone, the controller says so
(``ChatController.cause_gone``) and the banner takes the notice down (:meth:`Banner.clear_scope`),
instead of leaving "No model is loaded yet" up while answers stream:

* :data:`MODEL`: no model is loaded (a load failed, or a message or regeneration was refused for
  want of one). Gone when a model has loaded.
* :data:`ENGINE`: the worker died or could not start. Gone when a worker is up again (its news,
  "The engine restarted…", is a :data:`CONVERSATION` notice: it goes with the next answer there).
* :data:`STORE`: the conversation database refused a write (or is read-only). Gone when a later
  write succeeds: a message or an answer was stored.
* :data:`CONVERSATION`: something done in the conversation on screen (an answer that failed, a
  message refused). Gone when the user leaves it, or an answer there succeeds.

Notices without a cause (news such as a longer context, a deleted conversation) stay until they
are dismissed or replaced.
"""

from __future__ import annotations

MODEL = "model"
ENGINE = "engine"
STORE = "store"
CONVERSATION = "conversation"
CAUSES = (MODEL, ENGINE, STORE, CONVERSATION)
