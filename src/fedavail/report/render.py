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


def _marked(cell, escape, formats: dict) -> str:
    text, mark = (cell.text, cell.mark) if isinstance(cell, Cell) else (str(cell), None)
    return formats.get(mark, "{}").format(escape(text))


_MARKDOWN_MARKS = {"best": "**{}**", "second": "<u>{}</u>"}
_LATEX_MARKS = {"best": r"\textbf{{{}}}", "second": r"\underline{{{}}}"}


def _markdown_escape(text: str) -> str:
    return text.replace("|", "\\|")


def to_markdown(table: TextTable) -> str:
    lines = [f"# {table.title}", "", table.description, "",
             "| " + " | ".join(map(_markdown_escape, table.columns)) + " |",
             "|" + "---|" * len(table.columns)]
    lines += [f"| *{row.title}* |" + " |" * (len(table.columns) - 1) if isinstance(row, Section)
              else "| " + " | ".join(_marked(c, _markdown_escape, _MARKDOWN_MARKS) for c in row) + " |"
              for row in table.rows]
    if table.footnotes:
        lines += ["", *(f"{note}  " for note in table.footnotes)]
    return "\n".join(lines) + "\n"


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
_LATEX_UNICODE = {"±": r"$\pm$", "—": "---", "–": "--", "†": r"$^\dagger$", "α": r"$\alpha$", "γ": r"$\gamma$",
                  "λ": r"$\lambda$", "η": r"$\eta$", "≥": r"$\geq$", "≤": r"$\leq$", "×": r"$\times$", "‖": r"$\|$",
                  "Σ": r"$\Sigma$", "≈": r"$\approx$", "−": "-", "→": r"$\to$"}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, _LATEX_UNICODE.get(ch, ch)) for ch in str(text))


def to_latex(table: TextTable) -> str:
    n = len(table.columns)
    lines = [r"% " + latex_escape(table.title), r"\begin{table}[t]", r"\centering",
             rf"\caption{{{latex_escape(table.title)}. {latex_escape(table.description)}}}",
             r"\begin{tabular}{l" + "c" * (n - 1) + "}", r"\toprule",
             " & ".join(latex_escape(c) for c in table.columns) + r" \\", r"\midrule"]
    for i, row in enumerate(table.rows):
        if isinstance(row, Section):
            if i:
                lines.append(r"\midrule")
            lines.append(rf"\multicolumn{{{n}}}{{l}}{{\textit{{{latex_escape(row.title)}}}}} \\")
        else:
            lines.append(" & ".join(_marked(c, latex_escape, _LATEX_MARKS) for c in row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    if table.footnotes:
        lines.append(r"\par\smallskip\footnotesize " + r" \\ ".join(latex_escape(f) for f in table.footnotes))
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def rank_marks(values: dict, decimals: int) -> dict:
    """{key: "best" | "second"}: the two largest values at `decimals` precision (ties share a mark; NaN never ranks)."""
    rounded = {k: round(v, decimals) for k, v in values.items() if v == v}
    marks = dict(zip(sorted(set(rounded.values()), reverse=True), ("best", "second")))
    return {key: marks[value] for key, value in rounded.items() if value in marks}
