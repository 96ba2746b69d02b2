"""Searching the Hugging Face hub for GGUF repositories (the optional, online part of the catalogue).

The curated catalogue works offline; this finds anything else published as GGUF. It is one
``GET /api/models?search=...&filter=gguf`` through huggingface_hub's own HTTP session (its headers,
proxy settings and token), with an explicit timeout (the hub client's own metadata timeout,
``HF_HUB_ETAG_TIMEOUT``, 10 s unless set): the session's default is to wait forever, and a search
must never hang the app. Errors become the same :class:`HubOffline` /
:class:`DownloadError` messages as downloads.
"""

from __future__ import annotations

from dataclasses import dataclass

from huggingface_hub import constants
from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

from model_store.download_errors import HubOffline
from model_store.hub_transfer import hub_error, offline_mode


@dataclass(frozen=True)
class HubRepo:
    repo_id: str
    downloads: int | None
    likes: int | None
    last_modified: str | None


def search_gguf_repos(query: str, *, limit: int = 20, endpoint: str | None = None,
                      timeout: float | None = None) -> list[HubRepo]:
    """GGUF repositories matching ``query``, most downloaded first.

    Raises:
        HubOffline: Offline mode, no network or no answer within ``timeout`` (seconds; None:
            ``HF_HUB_ETAG_TIMEOUT``).
        DownloadError: The hub answered with an error.
    """
    if offline_mode():
        raise HubOffline("offline mode is on: HF_HUB_OFFLINE is set")
    url = f"{(endpoint or constants.ENDPOINT).rstrip('/')}/api/models"
    params = {"search": query, "filter": "gguf", "sort": "downloads", "limit": str(limit)}
    try:
        response = get_session().get(url, params=params, headers=build_hf_headers(),
                                     timeout=timeout or constants.HF_HUB_ETAG_TIMEOUT)
        hf_raise_for_status(response)
        items = response.json()
    except Exception as error:
        raise hub_error(error, repo_id="search", filename=f"search {query!r}", revision="main") from error
    return [HubRepo(item["id"], item.get("downloads"), item.get("likes"), item.get("lastModified"))
            for item in items if isinstance(item, dict) and isinstance(item.get("id"), str)]
