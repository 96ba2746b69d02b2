"""A conversation driven through a real worker process, turn by turn, for the snapshot tests."""

from __future__ import annotations

from app.services.turn import send_turn
from engine import protocol as p
from app.engine_clients.process_client import ProcessClient
from model_store.conversations import ConversationStore
from model_store.db import database_path, open_database

USER_MESSAGES = ["Hello! Who are you?", "Tell me about rivers.", "Why is the sky blue?",
                 "Name three fruits.", "Thanks, and goodbye."]
GREEDY = p.SamplingSpec(temperature=0)


class Chat:
    """A conversation in its own data folder, driven through a real worker process."""

    def __init__(self, data_dir, model: str):
        self.data_dir, self.model = data_dir, model
        self.store = ConversationStore(open_database(database_path(data_dir)))
        self.conversation = self.store.create("test", model=model)
        self.client = None
        self.loaded = None  # the model's ModelLoaded, once a worker has loaded it

    def start_worker(self, snapshot_budget_bytes=None):
        self.client = ProcessClient(data_dir=self.data_dir)
        if snapshot_budget_bytes is not None:
            self.client.snapshot_budget_bytes = snapshot_budget_bytes
        self.client.start()
        self.loaded = self.client.load_model(self.model)

    def stop_worker(self):
        self.client.close()
        self.client = None

    def say(self, text, reply_to=None, max_tokens=24):
        result = send_turn(self.store, self.client, self.conversation.id, text, reply_to=reply_to,
                           sampling=GREEDY, max_tokens=max_tokens)
        assert not result.errors and result.finished is not None, result.errors
        return result
