"""What an MCP tool's result says, as one text: its content blocks in order, text as it is and
anything else described in words ("[an image (image/png)]"), since the model reads text only.

The text is the server's, untouched: cleaning and capping it is the toolbox's job
(app.services.tools.safe_text). Only its size is bounded here, by stopping once the joined text is
longer than anything the toolbox keeps.
"""

from __future__ import annotations

import json

import mcp_types as types

from app.services.tools.safe_text import MAX_RESULT_CHARS

_ENOUGH = 4 * MAX_RESULT_CHARS  # joined text beyond this is never shown; the note counts what came


def result_text(result: types.CallToolResult) -> tuple[str, int]:
    """The result's blocks joined by blank lines (its structured content as JSON when it has no
    blocks), and how many characters they had in all before the text was shortened to what can be
    shown."""
    pieces = [block_text(block) for block in result.content]
    if not pieces and result.structured_content is not None:
        pieces = [json.dumps(result.structured_content, ensure_ascii=False, default=str)]
    total = sum(len(piece) for piece in pieces) + 2 * max(0, len(pieces) - 1)
    kept: list[str] = []
    length = 0
    for piece in pieces:
        kept.append(piece[: _ENOUGH - length])
        length += len(kept[-1]) + 2
        if length >= _ENOUGH:
            break
    return "\n\n".join(kept), total


def block_text(block: object) -> str:
    """One content block as text: its text, or what it is in words."""
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent):
        return f"[an image ({block.mime_type}) the tool returned; Hearth cannot show it to the model]"
    if isinstance(block, types.AudioContent):
        return f"[a sound recording ({block.mime_type}) the tool returned; Hearth cannot pass it on]"
    if isinstance(block, types.ResourceLink):
        return f"[a link to {block.title or block.name}: {block.uri}]"
    if isinstance(block, types.EmbeddedResource):
        return _resource_text(block.resource)
    return f"[a part of the result Hearth does not know ({type(block).__name__})]"


def _resource_text(resource: object) -> str:
    if isinstance(resource, types.TextResourceContents):
        return f"[{resource.uri}]\n{resource.text}"
    mime = getattr(resource, "mime_type", None) or "unknown type"
    return f"[a file ({mime}) at {getattr(resource, 'uri', '?')}; Hearth cannot show its contents to the model]"
