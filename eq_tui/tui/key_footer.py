"""The main screen's footer: every key shown (keys.py), wrapped onto a second line where one
line cannot hold them all (Textual's Footer is one line and cuts the rest off: at 120 columns
it hid `R h e c a m + -`). A key is clicked as it is pressed."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from textual.binding import Binding
from textual.content import Content
from textual.geometry import Size
from textual.widget import Widget

from eq_tui.tui.keys import KEYS

Item = tuple[str, str, str]  # key as shown, label, the key pressed by a click


def footer_items(bindings: Iterable[Binding], display: dict[str, str]) -> list[Item]:
    """(key, label, key to press) of the shown bindings, in order; keys of one group (`+ -`)
    share one item and their group's description."""
    items: list[Item] = []
    group: Binding.Group | None = None
    for binding in bindings:
        if not binding.show:
            continue
        shown = display.get(binding.key, binding.key)
        if binding.group is not None and binding.group is group:
            key, label, pressed = items[-1]
            items[-1] = (key + shown, label, pressed)
            continue
        group = binding.group
        items.append((shown, group.description if group else binding.description, binding.key))
    return items


def footer_lines(items: Sequence[Item], width: int) -> tuple[list[list[Item]], int]:
    """The items wrapped onto lines of `width` columns (an item never split), and the gap
    between two items: two columns, or one where that saves a line."""
    wide, narrow = _wrap(items, width, 2), _wrap(items, width, 1)
    return (wide, 2) if len(wide) <= len(narrow) else (narrow, 1)


def _wrap(items: Sequence[Item], width: int, gap: int) -> list[list[Item]]:
    lines: list[list[Item]] = [[]]
    used = 0
    for item in items:
        size = len(item[0]) + 1 + len(item[1])
        if lines[-1] and used + gap + size > width:
            lines.append([])
            used = 0
        used += size + (gap if lines[-1] else 0)
        lines[-1].append(item)
    return lines


def footer_height(width: int) -> int:
    """How many lines the main screen's footer takes at this width (its keys with the table
    focused: all of keys.py's, and the palette's)."""
    shown = [Binding(k.key, k.action, k.label, show=k.footer, group=k.group) for k in KEYS]
    items = [*footer_items(shown, {k.key: k.glyph or k.written for k in KEYS}),
             ("^p", "palette", "")]
    return len(footer_lines(items, max(1, width))[0])


class KeyFooter(Widget):
    DEFAULT_CSS = """
    KeyFooter {
        dock: bottom;
        height: auto;
        color: $footer-foreground;
        background: $footer-background;
    }
    """

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, _: object) -> None:
        self.refresh(layout=True)

    def items(self) -> list[Item]:
        app = self.app
        shown = [binding for _, binding, enabled, _ in self.screen.active_bindings.values()
                 if enabled]
        display = {binding.key: binding.key_display or app.get_key_display(binding)
                   for binding in shown}
        palette = app.COMMAND_PALETTE_BINDING if app.ENABLE_COMMAND_PALETTE else ""
        return [*footer_items(shown, display), *([(
            app.get_key_display(Binding(palette, "")), "palette", palette)] if palette else [])]

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(footer_lines(self.items(), max(1, width))[0])

    def render(self) -> Content:
        lines, gap = footer_lines(self.items(), max(1, self.size.width))
        return Content("\n").join(
            Content(" " * gap).join(
                Content.assemble(
                    Content.from_markup(f"[@click=app.simulate_key({pressed!r})]$text",
                                        text=key).stylize("bold $footer-key-foreground"),
                    " ", (label, "$footer-description-foreground"))
                for key, label, pressed in line)
            for line in lines)
