"""The worker's requests: the core that runs them one at a time, where commands arrive, and the answers and snapshots it stores."""
