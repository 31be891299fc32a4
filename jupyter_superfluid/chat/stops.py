"""Stop strings: cut message text at the first one, even when it spans deltas."""

from __future__ import annotations

from jupyter_superfluid.chat.types import ChatEvent, ItemDone, OutputItem, TextDelta


class StopFilter:
    """Cuts message text at the first stop string, holding back possible partial matches."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self.stops = tuple(s for s in stops if s)
        self.hold = max((len(s) for s in self.stops), default=1) - 1
        self.pending: dict[int, str] = {}
        self.hit = False

    def apply(self, events: list[ChatEvent], final: bool = False) -> list[ChatEvent]:
        """Pass events through, trimming message deltas at a stop string."""
        if not self.stops:
            return list(events)
        out: list[ChatEvent] = []
        for event in events:
            if self.hit and isinstance(event, TextDelta):
                continue
            if isinstance(event, TextDelta) and event.kind == "message":
                out.extend(self._text(event))
            elif isinstance(event, ItemDone) and event.item.kind == "message":
                out.extend(self._flush(event.index))
                out.append(ItemDone(event.index, _cut(event.item, self.stops)))
            else:
                out.append(event)
        return out

    def _text(self, event: TextDelta) -> list[ChatEvent]:
        buf = self.pending.get(event.index, "") + event.text
        for stop in self.stops:
            at = buf.find(stop)
            if at >= 0:
                self.hit = True
                self.pending[event.index] = ""
                return [TextDelta(event.index, "message", buf[:at])] if at else []
        keep = len(buf) - self.hold if self.hold else len(buf)
        self.pending[event.index] = buf[keep:]
        return [TextDelta(event.index, "message", buf[:keep])] if keep > 0 else []

    def _flush(self, index: int) -> list[ChatEvent]:
        rest = self.pending.pop(index, "")
        return [TextDelta(index, "message", rest)] if rest and not self.hit else []


def _cut(item: OutputItem, stops: tuple[str, ...]) -> OutputItem:
    text = item.text
    for stop in stops:
        at = text.find(stop)
        if at >= 0:
            text = text[:at]
    return OutputItem(kind=item.kind, text=text, complete=item.complete)
