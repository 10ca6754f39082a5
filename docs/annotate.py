"""Annotated pages: each paper's file as a page of two columns, its notes (docstrings and comment
blocks) beside the code they precede, generated from the source files themselves.

    python docs/annotate.py            # writes docs/pages/*.html
    python docs/annotate.py --check    # exit status 1 where a page differs from its source (stale)

Notes are Markdown (docs/developing.md, "The pages"); the pages need no network. Requires `markdown` and
`pygments` (docs/requirements.txt).
"""
import argparse
import ast
import html
import io
import re
import sys
import tokenize
from pathlib import Path

import markdown
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "pages"

# file -> (page title, the paper or what the file is, where in it the file's code is), in the README's reading order
PAGES = {
    "train.py": ("The training step", "one run from the command line to the test table",
                 "train_step: a global batch, the method's loss, backward, the update"),
    "methods.py": ("The interface every method implements", "what a method says and what it is given; zero-shot, "
                   "translate-train (Unicoder Sec. 3.3) and translate-test (XTREME)",
                   "Method: its training items, batches, loss, phases and predictions; Run; Phase"),
    "xeroalign.py": ("XeroAlign", "Gritta & Iacobacci, XeroAlign: Zero-Shot Cross-lingual Transformer Alignment, "
                     "Findings of ACL 2021", "Sec. 3 (Methodology), Algorithm 1; Sec. 3.1 (the setup)"),
    "fusion.py": ("FILTER", "Fang, Wang, Gan, Sun and Liu, FILTER: An Enhanced Fusion Method for Cross-lingual "
                  "Language Understanding, AAAI 2021", "Proposed Approach: FILTER Architecture (Eq. 1-4), "
                  "Self-Teaching Loss (Eq. 5-6, Algorithm 1), Inference; Implementation Details"),
    "mixup.py": ("X-Mixup", "Yang, Chen, Zhou and Li, Enhancing Cross-lingual Transfer by Manifold Mixup, ICLR 2022",
                 "Sec. 4.1 (Eq. 2-6), 4.2 (Eq. 7-8), 4.3 (mixup inference); Sec. 5.1 and Appendix C.1 (settings); "
                 "Appendix A.1 (Eq. 9-11)"),
    "contrastive.py": ("Contrastive language adaptation", "Yu and Joty, Effective Fine-tuning Methods for "
                       "Cross-lingual Adaptation, EMNLP 2021", "Sec. 3.2 (Eq. 1-5); Sec. 4.2 (Training Details)"),
    "cotrain.py": ("Co-training", "Yu and Joty, Effective Fine-tuning Methods for Cross-lingual Adaptation, EMNLP 2021",
                   "Sec. 3.1 (Algorithm 1); Sec. 4.2 (Co-training, Baselines: self-training)"),
    "unicoder.py": ("Unicoder's pre-training tasks", "Huang, Liang, Duan, Gong, Shou, Jiang and Zhou, Unicoder: A "
                    "Universal Language Encoder by Pre-training with Multiple Cross-lingual Tasks, EMNLP 2019",
                    "Pre-training Tasks in Unicoder (Eq. 1-2); Training Details"),
    "losses.py": ("The losses", "every paper's losses, one function per equation",
                  "XeroAlign Algorithm 1; FILTER Eq. 4-5; X-Mixup Eq. 7-8; Yu & Joty Eq. 1-5"),
    "levels.py": ("Task levels", "sentence labels, word labels and answer spans: what a method asks of the task",
                  "encoding and pairing, the task loss (cross-entropy), heads, scores"),
    "data.py": ("The examples, their batches and the task", "what an example is, read and encoded, how encoded items "
                "become batches, and a task's splits", "padding to the longest, (source, translation) pairs, epochs "
                "of global batches, shards across processes; a target's training texts paired with the source's by id"),
    "model.py": ("The encoder", "XLM-R (Conneau et al., ACL 2020), BERT (Devlin et al., NAACL 2019), XLM-R XL and XXL "
                 "(Goyal et al. 2021)", "the pieces the methods compose: embed, layers[i] (attention, feed_forward), "
                 "norm"),
    "evaluate.py": ("Evaluation", "per-language scores and the transfer gap; how aligned the languages are: linear CKA "
                    "(Kornblith et al. 2019; X-Mixup Eq. 1) and translation retrieval",
                    "summarise, linear_cka, retrieval_accuracy, alignment"),
}

# file -> (the definitions a reader of the methods can pass over, what they are): shown dimmed, under that line
SKIMMED = {
    "model.py": ({"from_hf", "from_directory", "from_pretrained", "load_weights", "load_hf_state_dict",
                  "save_pretrained", "save", "load"}, "Checkpoint I/O (minxlt/checkpoints/weights.py), not needed to "
                 "follow a method"),
    "evaluate.py": ({"arguments", "tatoeba_alignment", "test_input_of", "test_checkpoint", "plot_data",
                     "plot", "main", "report"}, "The command line (python evaluate.py): arguments, the checkpoint's "
                    "task, plots, files written"),
}

STYLE = """
body { margin: 0; font: 15px/1.5 Georgia, "DejaVu Serif", serif; color: #222; background: #fff; }
header { padding: 18px 28px 10px; border-bottom: 1px solid #ddd; }
header h1 { margin: 0 0 4px; font-size: 24px; }
header p { margin: 2px 0; color: #444; }
nav { font: 13px sans-serif; margin-top: 6px; }
nav a { margin-right: 10px; }
.section { display: grid; grid-template-columns: minmax(340px, 36%) minmax(0, 1fr); border-bottom: 1px solid #f0f0f0; }
.section.intro { grid-template-columns: minmax(0, 1fr); }
.intro .notes { border-right: none; border-bottom: 1px solid #e6e3dc; }
.intro .notes > :not(pre) { max-width: 52em; }
.notes { padding: 8px 22px 8px 28px; background: #fbfaf7; border-right: 1px solid #e6e3dc; \
overflow-wrap: anywhere; min-width: 0; }
.notes p { margin: 6px 0; }
.notes pre { white-space: pre; overflow-x: auto; overflow-wrap: normal; font: 12px/1.45 "DejaVu Sans Mono", monospace;
             background: #f3f0e8; padding: 6px 8px; width: fit-content; max-width: 100%; box-sizing: border-box; }
.notes pre.equations { display: grid; grid-template-columns: max-content max-content; column-gap: 3em; \
justify-content: start; }
.notes pre.equations .label { color: #7a3b00; }
.notes code { font: 13px "DejaVu Sans Mono", monospace; background: #f3f0e8; padding: 0 2px; }
.notes pre code { background: none; padding: 0; }
.notes table.terms { border-collapse: collapse; margin: 6px 0; }
.notes table.terms td { vertical-align: top; padding: 1px 12px 1px 0; }
.notes table.terms td:first-child { font: 13px "DejaVu Sans Mono", monospace; white-space: nowrap; }
.skim { font: 13px sans-serif; color: #666; font-style: italic; }
.skimmed .code pre, .skimmed .notes > :not(.skim) { opacity: 0.55; }
.code { padding: 8px 16px; min-width: 0; overflow-x: auto; }
.code pre { margin: 0; white-space: pre; font: 12.5px/1.45 "DejaVu Sans Mono", monospace; }
.eq { font-weight: bold; color: #7a3b00; }
sub, sup { line-height: 0; }
"""

FORMATTER = HtmlFormatter(nowrap=True, style="friendly")
STYLE += FORMATTER.get_style_defs(".code pre")
GREEK = {"lambda": "λ", "alpha": "α", "tau": "τ", "sigma": "σ", "theta": "θ", "beta": "β", "gamma": "γ", "mu": "μ"}
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
COMMAND = re.compile(r"\s*(python3?|torchrun|pip|bash)\b")
DRAWING = ("-->", "--.", "--'", ".--", "'--", ">--")  # an ASCII diagram's arrows and corners


def math(text):
    """The papers' notation set as they set it: Greek letters (lambda0: λ, 0 below), h~, Σ, √, a symbol's _x or
    _{...} below it (L_task, ||_F), ^T or ^{...} above it (H_d^s too), Eq. N in bold."""
    greek = lambda m: GREEK[m.group(1)] + (f"<sub>{m.group(2)}</sub>" if m.group(2) else "")
    text = re.sub(r"\b(" + "|".join(GREEK) + r")(\d?)(?![A-Za-z0-9])", greek, text)
    text = re.sub(r"\b([A-Za-z])~", "\\1\u0303", text)  # h~: h with a tilde above
    text = re.sub(r"\bsum(?=_)", "Σ", text).replace("sqrt(", "√(")
    base = "|".join(GREEK.values()) + r"|Σ|softmax|[A-Za-z]\u0303|[A-Za-z]{1,2}'?"
    text = re.sub(r"(?<![\w])(" + base + r")_(\{[^}]+\}|[A-Za-z0-9|]{1,3})(?![\w])",
                  lambda m: f"{m.group(1)}<sub>{m.group(2).strip('{}')}</sub>", text)
    text = re.sub(r"(?<![\w])([A-Za-z])_([a-z]{4,7})(?![\w])", r"\1<sub>\2</sub>", text)  # L_task, L_align
    text = re.sub(r"(\|\|)_([A-Za-z])(?![\w])", r"\1<sub>\2</sub>", text)  # a norm's ||_F
    sup = lambda m: f"<sup>{m.group(1).strip('{}')}</sup>"
    text = re.sub(r"(?:(?<=[\w)'])|(?<=</sub>))\^(\{[^}]+\}|[A-Za-z0-9])", sup, text)
    return re.sub(r"\b(Eq\. \d+(?:-\d+)?)", r'<span class="eq">\1</span>', text)


def notation(rendered):
    """math() on the text of rendered Markdown, outside inline code (an equation in a <pre> block is set too)."""
    out, in_pre, in_code = [], False, False
    for part in re.split(r"(<[^>]+>)", rendered):
        tag = re.match(r"<(/?)(pre|code)\b", part)  # (closing, name)
        if tag and tag[2] == "pre":
            in_pre = not tag[1]
        elif tag and not in_pre:
            in_code = not tag[1]
        out.append(part if part.startswith("<") or in_code else math(part))
    return "".join(out)


def note_html(text):
    """A note as HTML: Markdown, with lists, tables of terms and preformatted blocks as note writers write them."""
    lines, out = text.splitlines(), []
    for previous, line in zip(["", *lines], lines):
        if re.match(r"\s{0,3}- ", line) and previous.strip() and not re.match(r"\s{0,3}- |\s{4,}", previous):
            out.append("")
        out.append(line)
    held = []  # what Markdown and the notation must leave as made here: {i}'s HTML

    def hold(html_text):
        held.append(html_text)
        return f"\x00{len(held) - 1}\x00"

    lines, out, i = out, [], 0  # each run of "  term  description" lines: a held table of terms
    while i < len(lines):
        rows = []
        while i < len(lines) and (m := re.match(r"  (\S+)\s{2,}(\S.*)$", lines[i])):
            rows.append([m.group(1), m.group(2)])
            i += 1
            while i < len(lines) and re.match(r"\s{3,}\S", lines[i]):  # continued deeper
                rows[-1][1] += " " + lines[i].strip()
                i += 1
        if rows:
            cells = "".join(f"<tr><td>{html.escape(term)}</td><td>{notation(html.escape(about, quote=False))}</td></tr>"
                            for term, about in rows)
            out += ["", hold(f'<table class="terms">{cells}</table>'), ""]
        else:
            out.append(lines[i])
            i += 1
    outside_code = lambda line: "".join(p if i % 2 else html.escape(p, quote=False)  # what Markdown reads as HTML
                                        for i, p in enumerate(re.split(r"(`[^`]*`)", line)))
    text = "\n".join(line if line.startswith("    ") else outside_code(line) for line in out)  # (a <s> token)
    rendered = markdown.markdown(text, extensions=["tables"])
    rendered = re.sub(r"<pre><code>(.*?)</code></pre>", lambda m: hold(preformatted_html(html.unescape(m.group(1)))),
                      rendered, flags=re.S)
    return re.sub(r"<p>\x00(\d+)\x00</p>|\x00(\d+)\x00", lambda m: held[int(m[1] or m[2])], notation(rendered))


def preformatted_html(block):
    """An indented block, never wrapped: commands and drawings as written, equations set, labels in a column (what
    follows a line's last run of 3 spaces or more, where it names an Eq. N, Sec. N or Algorithm N)."""
    lines = block.rstrip("\n").split("\n")
    if any(COMMAND.match(line) for line in lines) or any(mark in block for mark in DRAWING):
        return f"<pre>{html.escape(block.rstrip(chr(10)), quote=False)}</pre>"
    set_ = lambda part: math(html.escape(part, quote=False))
    found = [re.fullmatch(r"(.*\S)\s{3,}(.*)", line) for line in lines]  # (equation, label)
    split = [m.groups() if m and re.search(r"Eq\.|Sec\.|Algorithm", m[2]) else None for m in found]
    if not any(split):
        return "<pre>" + "\n".join(set_(line) for line in lines) + "</pre>"
    cells = [parts or (line, "") for line, parts in zip(lines, split)]
    return '<pre class="equations">' + "".join(f'<span>{set_(eq)}</span><span class="label">{set_(label)}</span>'
                                               for eq, label in cells) + "</pre>"


def sections(source):
    """[(notes, code)]: each docstring or comment block with the code up to the next, a signature with its
    docstring; a definition without one starts a section without notes (never beside another's)."""
    lines, tree = source.splitlines(), ast.parse(source)
    first_line = lambda node: min([node.lineno] + [d.lineno for d in node.decorator_list])  # its decorators' too
    definitions = [n for n in ast.walk(tree) if isinstance(n, DEFINITIONS)]
    # {first line: (last line, text, the first line of what it documents)} of every docstring
    docs = {n.body[0].lineno: (n.body[0].end_lineno, ast.get_docstring(n), 1 if n is tree else first_line(n))
            for n in [tree, *definitions] if ast.get_docstring(n, clean=False) is not None}
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    comments = {t.start[0]: t.string.lstrip("#").strip() for t in tokens  # the lines holding a comment alone
                if t.type == tokenize.COMMENT and t.line.strip().startswith("#")}
    owners = {owner: first for first, (_, _, owner) in docs.items() if owner != 1}
    bare = {first_line(n) for n in definitions} - set(owners)  # the definitions without a docstring
    out, notes, code, n = [], None, [], 1

    def close():
        if notes is not None or any(line.strip() for line in code):
            while code and not code[-1].strip():
                code.pop()
            out.append((notes or "", "\n".join(code).strip("\n")))

    while n <= len(lines):
        if n in owners or n in docs:  # a documented definition (or the module): its docstring, its signature
            first = owners.get(n, n)
            last, text, _ = docs[first]
            close()
            notes, code = text, lines[n - 1:first - 1]
            n = last + 1
        elif n in comments:
            block = []
            while n in comments:
                block.append(comments[n])
                n += 1
            close()
            notes, code = "\n".join(block), []
            bare.discard(n)  # the comment is the definition's note, if a definition follows
        elif n in bare:
            close()
            notes, code = None, [lines[n - 1]]
            n += 1
        else:
            code.append(lines[n - 1])
            n += 1
    close()
    return [(text, body) for text, body in out if text or body]


def render(name, source):
    """The page of one file of PAGES; SKIMMED's definitions are dimmed, the first of a run of them saying why."""
    title, paper, where = PAGES[name]
    skimmed, why = SKIMMED.get(name, (set(), ""))
    introduction = ast.get_docstring(ast.parse(source))
    rows, previous = [], ""
    for i, (text, body) in enumerate(sections(source)):
        defined = re.match(r"(?:\s*@.*\n)*\s*(?:async\s+)?(?:def|class)\s+(\w+)", body)  # after its decorators
        kind = " intro" if i == 0 and text == introduction else " skimmed" if defined and defined[1] in skimmed else ""
        skim = f'<p class="skim">{html.escape(why)}</p>' if kind == " skimmed" != previous else ""  # once a run of them
        previous = kind
        code = highlight(body, PythonLexer(), FORMATTER).rstrip("\n") if body else ""  # as written: wide lines scroll
        rows.append(f'<div class="section{kind}"><div class="notes">{skim}{note_html(text) if text else ""}</div>'
                    f'<div class="code"><pre>{code}</pre></div></div>')
    links = " ".join(f'<a href="{Path(other).stem}.html">{PAGES[other][0]}</a>' for other in PAGES)
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{html.escape(title)}: {name}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<header>\n"
            f"<h1>{html.escape(title)} <small><code>{name}</code></small></h1>\n"
            f"<p>{html.escape(paper)}</p>\n<p>{math(html.escape(where))}</p>\n"
            f'<nav><a href="index.html">index</a> {links} <a href="../../{name}">source</a></nav>\n</header>\n'
            + "\n".join(rows) + "\n</body>\n</html>\n")


def pages():
    """{file name under docs/pages: its HTML}, from the sources as they are: the index, then each file's page."""
    items = "\n".join(f'<li><a href="{Path(name).stem}.html">{html.escape(title)}</a> (<code>{name}</code>): '
                      f"{html.escape(paper)}; {math(html.escape(where))}</li>"
                      for name, (title, paper, where) in PAGES.items())
    index = (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
             f"<title>minxlt: the papers beside the code</title>\n"
             f"<style>{STYLE} ol {{ padding: 10px 40px; }} li {{ margin: 6px 0; }}</style>\n</head>\n<body>\n<header>\n"
             f"<h1>minxlt: the papers beside the code</h1>\n"
             "<p>Each page shows a file's notes beside the code they explain, generated from the file by "
             'docs/annotate.py, in the README\'s reading order. <a href="../../README.md">README</a></p>\n</header>\n'
             f"<ol>\n{items}\n</ol>\n</body>\n</html>\n")
    return {"index.html": index, **{f"{Path(name).stem}.html": render(name, (ROOT / name).read_text(encoding="utf-8"))
                                      for name in PAGES}}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page differs from what its "
                   "source gives")
    args, made = p.parse_args(argv), pages()
    fresh = lambda name: (OUT / name).is_file() and (OUT / name).read_text(encoding="utf-8") == made[name]
    stale = [name for name in made if not fresh(name)]
    if args.check and stale:
        sys.exit(f"stale pages in {OUT}: {', '.join(stale)}; run python docs/annotate.py")
    for name in [] if args.check else made:
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / name).write_text(made[name], encoding="utf-8")
    print(f"{'checked' if args.check else 'wrote'} {len(PAGES) + 1} pages in {OUT}")


if __name__ == "__main__":
    main()
