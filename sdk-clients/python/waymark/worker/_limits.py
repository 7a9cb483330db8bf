"""The sizes the server takes from this worker, as its `Welcome` states them: the largest JSON
payload, and the largest message on the stream. The worker keeps within both itself, because
the server ends a stream that carries a message over its limit — and a workflow whose
completion kept ending the stream would be dispatched again and again."""

from __future__ import annotations

import json
from dataclasses import dataclass

from .._payload import from_payload
from .._proto import types_pb2, worker_pb2
from ..errors import PayloadTooLarge

# What a server that states no limits (one older than `Welcome.max_payload_bytes`) takes.
DEFAULT_MAX_PAYLOAD = 4 * 1024 * 1024
DEFAULT_MAX_MESSAGE = 9 * 1024 * 1024

# No JSON text is more than this many times its payload's protobuf encoding: a character the
# JSON escapes (a control character, as \u00XX) is the worst case, six bytes for one. Payloads
# that small are within the limit without measuring their JSON.
_JSON_PER_ENCODED_BYTE = 6

# Room in a message for what it carries beside its one payload: ids and names (256 characters
# at most each), numbers, a request id.
ENVELOPE = 16 * 1024

# The longest failure message sent, in UTF-8 bytes. An exception's text is the program's and may
# quote anything (a whole response body); the server does not bound it, so sent whole it could
# take a record or a completion over the message limit.
MAX_FAILURE_MESSAGE = 64 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    max_payload: int = DEFAULT_MAX_PAYLOAD
    max_message: int = DEFAULT_MAX_MESSAGE

    @staticmethod
    def from_welcome(w: worker_pb2.Welcome) -> Limits:
        return Limits(
            max_payload=w.max_payload_bytes or DEFAULT_MAX_PAYLOAD,
            max_message=w.max_message_bytes or DEFAULT_MAX_MESSAGE,
        )

    def check_payload(self, what: str, p: types_pb2.Payload) -> None:
        """Raises `PayloadTooLarge` when `p` is larger than the server takes; `what` names it
        in the message ("the workflow's output"). Two sizes count: its JSON text, against the
        payload limit, and its encoding, which must leave the message it goes in under the
        message limit — a list of small numbers encodes to five times its JSON."""
        encoded = p.ByteSize()
        if encoded * _JSON_PER_ENCODED_BYTE > self.max_payload:
            size = json_size(p)
            if size > self.max_payload:
                raise PayloadTooLarge(
                    f"{what} is {size} bytes of JSON; the server takes at most {self.max_payload}",
                    size=size,
                    limit=self.max_payload,
                )
        room = self.max_message - ENVELOPE
        if encoded > room:
            raise PayloadTooLarge(
                f"{what} is {encoded} bytes encoded; a worker message carries at most {room}",
                size=encoded,
                limit=room,
            )


def bounded(message: str) -> str:
    """A failure message cut to `MAX_FAILURE_MESSAGE` bytes, saying so. Cut before it is used at
    all, so a step's failure reads the same live and on replay."""
    data = message.encode("utf-8")
    if len(data) <= MAX_FAILURE_MESSAGE:
        return message
    note = f" … (cut: {len(data)} bytes in all)"
    keep = data[: MAX_FAILURE_MESSAGE - len(note.encode("utf-8"))]
    # A character cut in half is left out rather than recorded broken.
    return keep.decode("utf-8", errors="ignore") + note


def json_size(p: types_pb2.Payload) -> int:
    """Bytes of the payload's JSON text as the server measures it: compact, UTF-8, non-ASCII
    characters as themselves. A number in exponent form may come out a character or two longer
    here than the server writes it ("1e+16" for "1e16"), so the worker errs on the side of
    refusing."""
    text = json.dumps(from_payload(p), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return len(text.encode("utf-8"))
