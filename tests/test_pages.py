"""The annotated pages (docs/annotate.py): every file of the reading order renders, each note beside
the code it precedes, every "Eq. N" of the notes on its page beside code, the pages as fresh as
their sources, valid HTML whose links resolve, nothing fetched from another host; and the faults of
layout a browser showed: nothing preformatted wraps, a preformatted block fits its column, an
equation keeps its label on its line, and no ^ or _ of the notation is left as written."""
import ast
import html
import importlib.util
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

pytest.importorskip("markdown", reason="the pages are rendered with markdown (requirements-test.txt)")
ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("annotate", ROOT / "docs" / "annotate.py")
annotate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(annotate)
EQ = re.compile(r"Eq\. \d+(?:-\d+)?")
VOID = {"meta", "br", "img", "link", "hr", "input"}


class Page(HTMLParser):
    """A page read back: its tags checked to nest, its links, and each section's notes and code as text."""

    def __init__(self, text):
        super().__init__()
        self.stack, self.problems, self.links, self.sections, self.cell = [], [], [], [], None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.links += [attrs[name] for name in ("href", "src") if name in attrs]
        if tag in VOID:
            return
        self.stack.append((tag, attrs.get("class")))
        if "section" in (attrs.get("class") or "").split():
            self.sections.append({"notes": "", "code": "", "kind": attrs["class"]})
        elif attrs.get("class") in ("notes", "code") and self.sections:
            self.cell = attrs["class"]

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1][0] != tag:
            self.problems.append(f"</{tag}> closes {self.stack[-1:]}")
            return
        if self.stack.pop()[1] in ("notes", "code"):
            self.cell = None

    def handle_data(self, data):
        if self.cell:
            self.sections[-1][self.cell] += data


@pytest.fixture(scope="module")
def pages():
    return annotate.pages()


def test_every_page_is_what_its_source_gives(pages):
    # a page is made from its file: an edit of the file without `python docs/annotate.py` fails here
    assert set(pages) == {f"{Path(name).stem}.html" for name in annotate.PAGES} | {"index.html"}
    stale = [name for name, text in pages.items() if (annotate.OUT / name).read_text(encoding="utf-8") != text]
    assert not stale, f"stale pages {stale}: run python docs/annotate.py"
    annotate.main(["--check"])


@pytest.mark.parametrize("name", list(annotate.PAGES))
def test_each_note_is_beside_its_code_and_every_equation_is_there(pages, name):
    source = (ROOT / name).read_text(encoding="utf-8")
    page = Page(pages[f"{Path(name).stem}.html"])
    assert not page.problems and not page.stack, page.problems
    text = pages[f"{Path(name).stem}.html"]
    assert all(html.escape(part) in text for part in annotate.PAGES[name][:2]) and "<header>" in text  # the paper and its sections named
    sections = annotate.sections(source)
    assert len(page.sections) == len(sections) > 3
    for (notes, code), shown in zip(sections, page.sections):
        for equation in EQ.findall(notes):  # in the notes, beside code
            assert equation in shown["notes"] and shown["code"].strip(), (name, equation, notes[:80])
        assert "".join(code.split()) == "".join(shown["code"].split())  # the code as written, every character of it
    cited = [eq for notes, _ in sections for eq in EQ.findall(notes)]
    if name in ("fusion.py", "mixup.py", "contrastive.py", "unicoder.py", "losses.py"):  # papers with numbered equations
        assert cited, f"{name}: its notes cite no equation"
    if name in ("xeroalign.py", "cotrain.py"):  # XeroAlign's and co-training's are algorithms
        assert any("Algorithm 1" in s["notes"] and s["code"].strip() for s in page.sections)
    assert sum(len(EQ.findall(s["notes"])) for s in page.sections) == len(cited)


def test_a_definition_s_docstring_is_beside_its_signature_and_body():
    source = '''"""A module."""
import math


# Eq. 3 of the paper, the two halves
def f(x):
    """Eq. 4: the square."""
    y = x * x  # squared
    return y
'''
    sections = annotate.sections(source)
    assert sections == [("A module.", "import math"), ("Eq. 3 of the paper, the two halves", ""),
                        ("Eq. 4: the square.", 'def f(x):\n    y = x * x  # squared\n    return y')]


def test_a_page_changes_when_its_source_changes():
    source = (ROOT / "xeroalign.py").read_text(encoding="utf-8")
    edited = source.replace("def loss(self, model, batch):", "def loss(self, model, batch):  # edited", 1)
    assert edited != source and annotate.render("xeroalign.py", edited) != annotate.render("xeroalign.py", source)
    assert "edited" in annotate.render("xeroalign.py", edited)


def test_the_links_resolve_and_nothing_comes_from_another_host(pages):
    for name, text in pages.items():
        page = Page(text)
        assert not page.problems and not page.stack, (name, page.problems)
        for link in page.links:
            assert "://" not in link and not link.startswith("//"), (name, link)  # offline, from the file system
            assert (annotate.OUT / link).resolve().exists(), (name, link)


def test_the_papers_notation():
    math = annotate.math
    assert math("lambda h_T|S + (1 - lambda) h'_T") == "λ h<sub>T|S</sub> + (1 - λ) h'<sub>T</sub>"
    assert math("lambda0 sigmoid(H(A^T))") == "λ<sub>0</sub> sigmoid(H(A<sup>T</sup>))"
    assert math("h^{l+1} and lambda_LA, Eq. 5") == 'h<sup>l+1</sup> and λ<sub>LA</sub>, <span class="eq">Eq. 5</span>'
    assert math("mixup_encode and ratio_net") == "mixup_encode and ratio_net"  # names of code stay as they are
    assert annotate.notation("<p>h_T <code>h_T</code></p><pre><code>h_T</code></pre>") == \
        "<p>h<sub>T</sub> <code>h_T</code></p><pre><code>h<sub>T</sub></code></pre>"  # inline code untouched, equations set
    assert "&lt;s&gt;" in annotate.note_html("the <s> vector, `<s>`") and "<s>" not in annotate.note_html("the <s> vector")


def test_the_pages_follow_the_reading_order():
    # every file of the README's reading order that a reader opens beside the papers has a page, in that order
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    steps = readme[readme.index("## Reading order"):readme.index("| folder |")]
    named = list(dict.fromkeys(name for name in re.findall(r"`(\w+\.py)`", steps) if (ROOT / name).is_file()))
    assert [name for name in named if name in annotate.PAGES] == list(annotate.PAGES)
    assert set(named) - set(annotate.PAGES) == {"reproduce.py"}  # a command that runs a paper's table, with its experiment files


def style_rules():
    """{selector: {property: value}} of the pages' style sheet."""
    rules = {}
    for selectors, body in re.findall(r"([^{}]+)\{([^}]*)\}", annotate.STYLE):
        declared = dict(part.split(":", 1) for part in body.split(";") if ":" in part)
        for selector in selectors.split(","):
            rules.setdefault(selector.strip(), {}).update({k.strip(): v.strip() for k, v in declared.items()})
    return rules


def test_nothing_preformatted_wraps(pages):
    # an ASCII diagram, an equation and its label, a line of code: each stays one line; what is wider
    # than its column scrolls (a wrapped diagram is garbage, a wrapped label falls under its equation)
    rules = style_rules()
    assert rules[".notes pre"]["white-space"] == rules[".code pre"]["white-space"] == "pre"
    assert rules[".notes pre"]["overflow-x"] == rules[".code"]["overflow-x"] == "auto"
    for selector, declared in rules.items():
        if "pre" in selector.split()[-1]:
            assert declared.get("white-space", "pre") == "pre" and declared.get("overflow-wrap", "normal") == "normal", selector
    for name, text in pages.items():
        assert "text-indent" not in text and "pre-wrap" not in text, name  # no line made to wrap under itself


def preformatted_lines(notes):
    """The lines of each <pre> block of a section's notes, as a reader sees them (an equation and its label on one line)."""
    out = []
    for block in re.findall(r"<pre[^>]*>(.*?)</pre>", notes, flags=re.S):
        block = block.replace('</span><span class="label">', "   ").replace("</span><span>", "\n")
        out += html.unescape(re.sub(r"<[^>]+>", "", block)).split("\n")
    return out


def test_every_preformatted_block_fits_its_column(pages):
    # at 1400 pixels the notes column holds 60 characters of the blocks' 12px monospace, and the
    # file's introduction, which spans the page, 180 (140 asked here): no block scrolls there
    for name, text in pages.items():
        for kind, notes in re.findall(r'<div class="(section[^"]*)"><div class="notes">(.*?)</div><div class="code">', text, flags=re.S):
            widest = max(map(len, preformatted_lines(notes)), default=0)
            assert widest <= (140 if "intro" in kind else 60), (name, kind, widest, preformatted_lines(notes))


def test_an_equation_keeps_its_label_on_its_line(pages):
    block = annotate.preformatted_html("h'_S = LN_a(h_S + MHA(h_S))      Eq. 2\nlambda = lambda0 sigmoid(b)      the sentence after Eq. 5\n"
                                       "h~_T = LN_a(h_T)")
    assert block.startswith('<pre class="equations">') and "<div" not in block and "\n" not in block
    cells = re.findall(r'<span( class="label")?>(.*?)</span>(?=<span|</pre>)', re.sub(r'<span class="eq">(.*?)</span>', r"\1", block))
    assert [(bool(label), re.sub(r"<[^>]+>", "", cell)) for label, cell in cells] == [
        (False, "h'S = LNa(hS + MHA(hS))"), (True, "Eq. 2"), (False, "λ = λ0 sigmoid(b)"), (True, "the sentence after Eq. 5"),
        (False, "h̃T = LNa(hT)"), (True, "")]
    diagram = "source -> embed --.\n                   >-- concat\ntarget -> embed --'"
    assert annotate.preformatted_html(diagram) == f"<pre>{html.escape(diagram, quote=False)}</pre>"  # as drawn, no notation
    command = "python train.py --method x_y --out runs/lambda_0"
    assert annotate.preformatted_html(command) == f"<pre>{command}</pre>"
    assert "<pre class=\"equations\">" in pages["mixup.html"]


def test_the_notation_leaves_no_marks(pages):
    # outside code, commands and diagrams, a ^ or a symbol's _ is set (H_d^s: d below, s above), never left as typed
    assert annotate.math("(H_d^s, H_d^t)") == "(H<sub>d</sub><sup>s</sup>, H<sub>d</sub><sup>t</sup>)"
    assert annotate.math("||Y^T X||_F^2 and L_task") == "||Y<sup>T</sup> X||<sub>F</sub><sup>2</sup> and L<sub>task</sub>"
    for name, text in pages.items():
        for notes in re.findall(r'<div class="notes">(.*?)</div><div class="code">', text, flags=re.S):
            prose = re.sub(r"<code>.*?</code>|<pre>.*?</pre>", "", notes, flags=re.S)  # code, and blocks shown as written
            prose = html.unescape(re.sub(r"<[^>]+>", "", prose))
            assert "^" not in prose, (name, prose[max(0, prose.index("^") - 40):prose.index("^") + 20])
            assert not re.search(r"(?<![\w])[A-Za-z]_[A-Za-z0-9]{1,3}(?![\w])", prose), (name, re.findall(r"\S*\b[A-Za-z]_\w+", prose))


def test_machinery_is_dimmed_with_what_it_is(pages):
    # checkpoint I/O in model.py and evaluate.py's command line: dimmed, the first of a run saying what it is
    for name, (names, why) in annotate.SKIMMED.items():
        source = (ROOT / name).read_text(encoding="utf-8")
        defined = {node.name for node in ast.walk(ast.parse(source)) if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
        assert names <= defined, names - defined  # no name left behind by a rename
        page = Page(pages[f"{Path(name).stem}.html"])
        dimmed = [s for s in page.sections if "skimmed" in s["kind"].split()]
        assert len(dimmed) >= len(names) and html.unescape(why) in dimmed[0]["notes"]
        assert sum(why in s["notes"] for s in page.sections) < len(dimmed)
