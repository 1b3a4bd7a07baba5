"""A table that draws only the rows on the screen (Textual's Line API). Its rows are an ordered
list of keys and a function that gives a row's cells: 5,000 jobs cost a sort, where a DataTable
measures every cell of every row it is given. It looks like, and answers the keys and the mouse
as, a DataTable with a row cursor, zebra stripes and fixed-width columns; its first
`fixed_columns` stay in place while the rest scroll sideways (a job's id stays in view)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len, set_cell_size
from rich.padding import Padding
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size, Spacing
from textual.message import Message
from textual.renderables.styled import Styled
from textual.scroll_view import ScrollView
from textual.strip import Strip

CELL_PADDING = 1
HEADER = -1  # the header's row in the cells' meta (what a click reads), as in a DataTable
EMPTY = Text(no_wrap=True, end="")


@dataclass(frozen=True)
class TableColumn:
    key: str
    label: str
    width: int  # the cells' width, without the padding on each side

    @property
    def render_width(self) -> int:
        return self.width + 2 * CELL_PADDING


class RowTable(ScrollView, can_focus=True):
    ALLOW_SELECT = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor(-1)", "Cursor up", show=False),
        Binding("down", "cursor(1)", "Cursor down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("ctrl+home", "jump('top')", "Top", show=False),
        Binding("ctrl+end", "jump('bottom')", "Bottom", show=False),
        Binding("home", "jump('left')", "Home", show=False),
        Binding("end", "jump('right')", "End", show=False),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "row-table--header", "row-table--header-hover", "row-table--cursor",
        "row-table--hover", "row-table--even-row", "row-table--odd-row",
    }
    # DataTable's look, for the parts this table has
    DEFAULT_CSS = """
    RowTable {
        background: $surface;
        color: $foreground;
        &:focus {
            background-tint: $foreground 5%;
            & > .row-table--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .row-table--header {
                background-tint: $foreground 5%;
            }
        }
        &:dark > .row-table--even-row {
            background: $surface-darken-1 40%;
        }
        & > .row-table--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        &:ansi > .row-table--header {
            background: ansi_bright_blue;
            color: ansi_default;
        }
        & > .row-table--even-row {
            background: $surface-lighten-1 50%;
        }
        & > .row-table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        & > .row-table--header-hover {
            background: $accent 30%;
        }
        & > .row-table--hover {
            background: $block-hover-background;
        }
    }
    """

    class RowHighlighted(Message):
        """The cursor is on another row (or on none: no rows)."""

        def __init__(self, key: str | None) -> None:
            super().__init__()
            self.key = key

    class RowSelected(Message):
        """enter, or a click on the row under the cursor."""

        def __init__(self, key: str) -> None:
            super().__init__()
            self.key = key

    class HeaderSelected(Message):
        def __init__(self, column: str) -> None:
            super().__init__()
            self.column = column

    def __init__(self, cells: Callable[[str], Sequence[Text]], *, id: str | None = None) -> None:
        """`cells`: a row's cells by its key, one per column (asked only for rows drawn)."""
        super().__init__(id=id)
        self._cells_of = cells
        self.columns: dict[str, TableColumn] = {}
        self._keys: list[str] = []
        self._index: dict[str, int] = {}
        self.cursor_row = 0
        self._announced: str | None = None
        self._hover_row: int | None = None  # under the mouse, while it moves over the table
        # each row's segments, with what they were drawn for (row, cursor, hover, focus, width)
        self._drawn: dict[str, tuple[tuple[object, ...], list[Segment]]] = {}
        self._row_styles: dict[tuple[str, bool], Style] = {}
        self.fixed_columns = 0  # the first columns, kept in place while scrolling sideways
        self._fixed_width = 0

    # ---- rows and columns ------------------------------------------------------------------

    def set_columns(self, columns: Iterable[TableColumn]) -> None:
        self.columns = {column.key: column for column in columns}
        self._fixed_width = sum(column.render_width for column in
                                list(self.columns.values())[:self.fixed_columns])
        self._drawn.clear()
        self._resize()

    def scroll_to_column(self, key: str) -> None:
        """Scroll sideways (as little as may be) so that this column shows whole beside the
        fixed ones."""
        start = 0
        for name, column in self.columns.items():
            if name == key:
                break
            start += column.render_width
        else:
            return
        end = start + self.columns[key].render_width
        lowest, highest = end - self.size.width, start - self._fixed_width
        x = min(max(self.scroll_x, lowest), highest)
        self.scroll_to(x=max(0, min(x, self.max_scroll_x)), animate=False, force=True)

    def set_rows(self, keys: list[str], cursor: str | None = None) -> None:
        """The rows in this order; the cursor on `cursor` if it is among them (scrolled into
        view), else at the same place."""
        self._keys = keys
        self._index = {key: i for i, key in enumerate(keys)}
        self._resize()
        if cursor is not None and cursor in self._index:
            self.move_cursor(row=self._index[cursor])
        else:
            self.move_cursor(row=self.cursor_row, scroll=False)
        self.refresh()

    @property
    def keys(self) -> list[str]:
        return self._keys

    @property
    def row_count(self) -> int:
        return len(self._keys)

    @property
    def cursor_key(self) -> str | None:
        return self._keys[self.cursor_row] if self._keys else None

    def get_row_index(self, key: str) -> int:
        """Where the row is now (KeyError if it is not shown)."""
        return self._index[key]

    def get_row_at(self, row: int) -> list[Text]:
        return list(self._cells_of(self._keys[row]))

    def get_cell(self, key: str, column: str) -> Text:
        return self._cells_of(key)[list(self.columns).index(column)]

    def refresh_rows(self, keys: Iterable[str]) -> None:
        """Draw these rows again (their cells changed), those on the screen now."""
        top, height = self.scroll_offset.y, self.scrollable_content_region.height
        for key in keys:
            self._drawn.pop(key, None)
            row = self._index.get(key)
            if row is not None and top <= row < top + height:
                self.refresh(Region(0, row + 1 - top, self.size.width, 1))  # under the header

    def _resize(self) -> None:
        width = sum(column.render_width for column in self.columns.values())
        self.virtual_size = Size(width, len(self._keys) + 1)

    # ---- the cursor ------------------------------------------------------------------------

    def move_cursor(self, *, row: int, scroll: bool = True, animate: bool = False) -> None:
        old, self.cursor_row = self.cursor_row, max(0, min(row, len(self._keys) - 1))
        if old != self.cursor_row:
            self.refresh_rows(self._keys[i] for i in (old, self.cursor_row)
                              if i < len(self._keys))
        if scroll:
            if self.size.height:
                self._scroll_to_cursor(animate)
            else:  # not laid out yet: how far to scroll is known after
                self.call_after_refresh(self._scroll_to_cursor)
        key = self.cursor_key
        if key != self._announced:
            self._announced = key
            self.post_message(self.RowHighlighted(key))

    def _scroll_to_cursor(self, animate: bool = False) -> None:
        region = Region(int(self.scroll_x), self.cursor_row + 1, self.virtual_size.width, 1)
        self.scroll_to_region(region, animate=animate, spacing=Spacing(1, 0, 0, 0), force=True)

    def _unhover(self) -> None:
        """The row under the mouse is no longer shown (a key moved the cursor, the mouse left)."""
        if self._hover_row is not None:
            row, self._hover_row = self._hover_row, None
            self._refresh_row(row)

    def action_cursor(self, delta: int) -> None:
        self._unhover()
        self.move_cursor(row=self.cursor_row + delta)

    def action_page(self, direction: int) -> None:
        self._unhover()
        height = self.scrollable_content_region.height - 1
        self.scroll_relative(y=direction * height, animate=False, force=True)
        self.move_cursor(row=self.cursor_row + direction * height, scroll=False)

    def action_jump(self, to: str) -> None:
        """ctrl+home, ctrl+end: the first and last row; home, end: the left and right edge."""
        self._unhover()
        if to in ("top", "bottom"):
            self.move_cursor(row=0 if to == "top" else len(self._keys) - 1)
        else:
            self.scroll_x = 0 if to == "left" else self.max_scroll_x

    def action_select_cursor(self) -> None:
        self._unhover()
        key = self.cursor_key
        if key is not None:
            self.post_message(self.RowSelected(key))

    # ---- the mouse -------------------------------------------------------------------------

    async def _on_click(self, event: events.Click) -> None:
        """A header sorts by its column; a row takes the cursor, or opens if it had it."""
        meta = event.style.meta
        row, column = meta.get("row"), meta.get("column")
        if not isinstance(row, int) or not isinstance(column, int) or row >= len(self._keys):
            return
        if row == HEADER:
            columns = list(self.columns)
            if 0 <= column < len(columns):
                self.post_message(self.HeaderSelected(columns[column]))
            return
        event.stop()
        if row == self.cursor_row:
            self.post_message(self.RowSelected(self._keys[row]))
        self.move_cursor(row=row, animate=True)

    def _on_mouse_move(self, event: events.MouseMove) -> None:
        row = event.style.meta.get("row")
        old, self._hover_row = self._hover_row, row if isinstance(row, int) else None
        if old != self._hover_row:
            for changed in (old, self._hover_row):
                self._refresh_row(changed)

    def _on_leave(self, _: events.Leave) -> None:
        self._unhover()

    def _refresh_row(self, row: int | None) -> None:
        if row == HEADER:
            self.refresh(Region(0, 0, self.size.width, 1))
        elif row is not None and row < len(self._keys):
            self.refresh_rows([self._keys[row]])

    # ---- drawing ---------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._row_styles.clear()
        self._drawn.clear()
        self.refresh()

    def _style(self, name: str) -> Style:
        key = (name, self.has_focus)
        found = self._row_styles.get(key)
        if found is None:
            found = self._row_styles[key] = self.get_component_styles(name).rich_style
        return found

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        scroll_x, scroll_y = self.scroll_offset
        row = HEADER if y == 0 else y - 1 + scroll_y
        if row >= len(self._keys):
            return Strip.blank(width, self.rich_style)
        state = (row, row == self.cursor_row, row == self._hover_row, self.has_focus, width)
        key = self._keys[row] if row != HEADER else ""
        drawn = self._drawn.get(key)
        if drawn is None or drawn[0] != state:
            drawn = self._drawn[key] = (state, self._draw(row, width))
        strip, fixed = Strip(drawn[1]), self._fixed_width
        if fixed and scroll_x:  # the fixed columns, then the rest from where it is scrolled
            strip = Strip.join([strip.crop(0, fixed),
                                strip.crop(fixed + scroll_x, scroll_x + width)])
        else:
            strip = strip.crop(scroll_x, scroll_x + width)
        return strip.adjust_cell_length(width, self.rich_style).simplify()

    def _draw(self, row: int, width: int) -> list[Segment]:
        """A row's segments, the whole table's width and on to the widget's edge."""
        header = row == HEADER
        cells: Sequence[Text] = [Text(c.label) for c in self.columns.values()] if header \
            else self._cells_of(self._keys[row])
        row_style = self._style("row-table--header" if header else
                                "row-table--odd-row" if row % 2 else "row-table--even-row")
        component = Style()
        if row == self._hover_row:
            component += self.get_component_rich_style("row-table--hover")
            if header:
                component += self.get_component_rich_style("row-table--header-hover")
        if row == self.cursor_row and not header:
            component += self.get_component_rich_style("row-table--cursor")
        # the cursor's colour over a cell's own; a cell's own background over the cursor's
        post = Style.from_color(color=component.color) + Style.null()
        segments: list[Segment] = []
        for index, (column, cell) in enumerate(zip(self.columns.values(), cells, strict=True)):
            pre = row_style + Style.from_meta({"row": row, "column": index}) + component
            segments.extend(self._cell(cell, column.render_width, pre, post))
        extend = row_style + component + Style.from_meta(
            {"row": row, "column": 0, "out_of_bounds": True})
        segments.append(Segment(" " * max(0, width - self.virtual_size.width), extend))
        return segments

    def _cell(self, cell: Text, width: int, pre: Style, post: Style) -> list[Segment]:
        """One line of a cell, padded, with the table's styles under and over its own."""
        if cell.spans or "\n" in cell.plain or (isinstance(cell.style, str) and cell.style):
            options = self.app.console_options.update_dimensions(width, 1).update(no_wrap=True)
            return self.app.console.render_lines(
                Styled(Padding(cell or EMPTY, (0, CELL_PADDING)), pre_style=pre, post_style=post),
                options)[0]
        return cell_segments(cell, width - 2 * CELL_PADDING, pre, post)


def cell_segments(cell: Text, width: int, pre: Style, post: Style) -> list[Segment]:
    """What Rich makes of `Styled(Padding(cell, (0, 1)), pre, post)` on one line of `width`
    cells and the padding (the cell cropped, never wrapped), without its renderers: a third of
    the time of a row. For a cell on one line without spans, its style a Style or none."""
    text = cell.plain
    if len(text) > width:  # whitespace past the width goes first, as Rich's rstrip_end
        text = text[:max(len(text.rstrip()), width)]
    if cell_len(text) > width:
        text = set_cell_size(text, width)
    own = cell.style if isinstance(cell.style, Style) else None
    edge = pre + post
    pad = " " * CELL_PADDING
    segments = [Segment(pad, edge)]
    if text:
        segments.append(Segment(text, pre + own + post))
    if cell_len(text) < width:
        segments.append(Segment(" " * (width - cell_len(text)), edge))
    segments.append(Segment(pad, edge))
    return segments
