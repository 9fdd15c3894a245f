"""A small table model written out as Markdown and LaTeX (booktabs): cells may be bold ("best") or underlined
("second"), rows may be section headings, and footnotes explain marks such as † (a diverged run)."""

from dataclasses import dataclass, field


@dataclass
class Cell:
    text: str
    mark: str | None = None  # "best" (bold) | "second" (underlined) | None


@dataclass
class Section:
    title: str


@dataclass
class TextTable:
    title: str
    description: str
    columns: list[str]
    rows: list = field(default_factory=list)  # lists of Cell/str, or Section
    footnotes: list[str] = field(default_factory=list)


def _text(cell) -> tuple[str, str | None]:
    return (cell.text, cell.mark) if isinstance(cell, Cell) else (str(cell), None)


def _markdown_cell(cell) -> str:
    text, mark = _text(cell)
    text = text.replace("|", "\\|")
    if mark == "best":
        return f"**{text}**"
    if mark == "second":
        return f"<u>{text}</u>"
    return text


def to_markdown(table: TextTable) -> str:
    lines = [f"# {table.title}", "", table.description, "",
             "| " + " | ".join(c.replace("|", "\\|") for c in table.columns) + " |",
             "|" + "---|" * len(table.columns)]
    for row in table.rows:
        if isinstance(row, Section):
            lines.append(f"| *{row.title}* |" + " |" * (len(table.columns) - 1))
        else:
            lines.append("| " + " | ".join(_markdown_cell(c) for c in row) + " |")
    if table.footnotes:
        lines.append("")
        lines += [f"{note}  " for note in table.footnotes]
    return "\n".join(lines) + "\n"


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
_LATEX_UNICODE = {"±": r"$\pm$", "—": "---", "–": "--", "†": r"$^\dagger$", "α": r"$\alpha$", "γ": r"$\gamma$",
                  "λ": r"$\lambda$", "η": r"$\eta$", "≥": r"$\geq$", "≤": r"$\leq$", "×": r"$\times$", "‖": r"$\|$",
                  "Σ": r"$\Sigma$", "≈": r"$\approx$", "−": "-", "→": r"$\to$"}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, _LATEX_UNICODE.get(ch, ch)) for ch in str(text))


def _latex_cell(cell) -> str:
    text, mark = _text(cell)
    text = latex_escape(text)
    if mark == "best":
        return rf"\textbf{{{text}}}"
    if mark == "second":
        return rf"\underline{{{text}}}"
    return text


def to_latex(table: TextTable) -> str:
    n = len(table.columns)
    lines = [r"% " + latex_escape(table.title), r"\begin{table}[t]", r"\centering",
             rf"\caption{{{latex_escape(table.title)}. {latex_escape(table.description)}}}",
             r"\begin{tabular}{l" + "c" * (n - 1) + "}", r"\toprule",
             " & ".join(latex_escape(c) for c in table.columns) + r" \\", r"\midrule"]
    first = True
    for row in table.rows:
        if isinstance(row, Section):
            if not first:
                lines.append(r"\midrule")
            lines.append(rf"\multicolumn{{{n}}}{{l}}{{\textit{{{latex_escape(row.title)}}}}} \\")
        else:
            lines.append(" & ".join(_latex_cell(c) for c in row) + r" \\")
        first = False
    lines += [r"\bottomrule", r"\end{tabular}"]
    if table.footnotes:
        lines.append(r"\par\smallskip\footnotesize " + r" \\ ".join(latex_escape(f) for f in table.footnotes))
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def rank_marks(values: dict, decimals: int) -> dict:
    """{key: "best" | "second"} for the largest and second-largest values after rounding to the displayed precision
    (ties share a mark; NaN never ranks)."""
    rounded = {k: round(v, decimals) for k, v in values.items() if v == v}
    distinct = sorted(set(rounded.values()), reverse=True)
    marks = {}
    for key, value in rounded.items():
        if distinct and value == distinct[0]:
            marks[key] = "best"
        elif len(distinct) > 1 and value == distinct[1]:
            marks[key] = "second"
    return marks
