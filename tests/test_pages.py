"""The annotated pages (docs/annotate.py): every paper's file renders, each note beside the code it
precedes, every "Eq. N" of the notes on its page beside code, the pages as fresh as their sources,
valid HTML whose links resolve, and nothing fetched from another host."""
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
        if attrs.get("class") == "section":
            self.sections.append({"notes": "", "code": ""})
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
