"""FILTER's Microsoft Translator translations of XTREME's UD-POS and PAN-X, as its
scripts/download_data.sh fetches them (udpos.zip, panx.zip, lines 69-70, 112-117, 204-209) and its
examples/run_xtag.py reads them (477-482: <data>/translations/<split>-<pair>.tsv), and the segments
they are aligned with.

XTREME's preprocessing (utils_preprocess.py, udpos_tokenize_preprocess and panx_tokenize_preprocess,
which download_data.sh:106 and 136 run with xlm-roberta-large's tokenizer and 128 tokens) cuts a
sentence whose words take more than 125 of XLM-R's sub-words into consecutive segments; the
processed split holds one segment a sentence. FILTER's files translate those segments, one a line,
in the processed split's order (utils_tag.py:56-93 reads line i beside the split's i-th segment):

    train-en-<lang>.tsv    the English training segments, translated into <lang>
    dev-<lang>-en.tsv      <lang>'s dev segments, translated into English
    test-<lang>-en.tsv     <lang>'s test segments, translated into English

A line's words are its words between spaces (utils_tag.py:62-63 would split Japanese, Thai and
Chinese lines into characters, but is given "en-zh" or "zh-en" there, never "zh"); an empty line
stands for its segment's own words, as utils_tag.py:58-66 reads one. The files carry no tags
(utils_tag.py:83 tags every word O): word labels do not carry over to a translation. Here a training sentence is paired with its segments'
translations joined (train.py trains a sentence whole, cut at --max-length), and each window of a
test sentence with its own segment's translation (levels.Word.score).
"""
from data import Example
from minxlt.errors import DataError, InputError
from minxlt.tasks.readers import read_lines

FOLDER = "filter-translations"  # where download.py filter-translations puts them, in the task's data folder
PROCESSED_LENGTH = 128  # preprocess_udpos.sh:21 and preprocess_panx.sh:21, MAXL=128
SPECIALS = 3  # utils_preprocess.py:39 and 132: XLMRobertaTokenizer's special_tokens_count


def xtreme_segments(words, tokenizer, max_length=PROCESSED_LENGTH):
    """The number of words in each segment that XTREME's preprocessing cuts a sentence into
    (utils_preprocess.py:52-71, 144-163): each as many words as fit in max_length - 3 of the
    tokenizer's sub-words, a word with none, or with more than fit alone, counting as one (<unk>)."""
    budget = max_length - SPECIALS
    sizes, used = [0], 0
    for pieces in tokenizer.tokenize_words(words):
        n = len(pieces) if 0 < len(pieces) <= budget else 1
        if used + n > budget:
            sizes.append(0)
            used = 0
        sizes[-1] += 1
        used += n
    return sizes


def translated_segments(path, sentences, tokenizer):
    """[[(line number, words)] of each sentence's segments]: `sentences` (lists of words) cut into
    XTREME's segments (xtreme_segments, with the run's tokenizer: XLM-R's is the one that cut
    them), each with the words of its line of FILTER's file at `path`, or its own where the line is
    empty. A file with more or fewer lines than there are segments is refused, at its first line
    without a segment or the line that is missing."""
    lines, cuts = read_lines(path), [xtreme_segments(words, tokenizer) for words in sentences]
    count = sum(len(sizes) for sizes in cuts)
    if len(lines) != count:
        raise DataError(path, min(len(lines), count) + 1,
                        f"{len(lines)} lines for the {count} segments that XTREME's preprocessing cuts the {len(sentences)} sentences "
                        f"into (at most {PROCESSED_LENGTH - SPECIALS} of the tokenizer's sub-words each): FILTER's translations are "
                        "line-aligned with those segments (utils_tag.py:76-91); check that the file translates this split of this "
                        "language, and that the model's tokenizer is XLM-R's, with which XTREME's preprocessing counted them")
    out, at = [], 0
    for words, sizes in zip(sentences, cuts):
        segments, start = [], 0
        for size in sizes:
            number, line = lines[at]
            segments.append((number, line.split() or words[start:start + size]))
            start, at = start + size, at + 1
        out.append(segments)
    return out


def read_training_translations(path, lang, sources, tokenizer):
    """The translations into `lang` of the source's training sentences (`sources`, as read), from
    FILTER's train-en-<lang>.tsv: each sentence's segments' lines joined, with the sentence's id
    and no tags."""
    out = []
    for e, segments in zip(sources, translated_segments(path, [e.words for e in sources], tokenizer)):
        words = [w for _, segment in segments for w in segment]
        out.append(Example(id=e.id, lang=lang, text=" ".join(words), words=words, where=f"{path}:{segments[0][0]}"))
    return out


def read_test_translations(path, source, examples, tokenizer):
    """The translations into the `source` language of a split's sentences (`examples`), from
    FILTER's <split>-<lang>-en.tsv: a sentence's first segment's with its id, its segment k's
    (k > 0) with the id "<id>#<k>", which levels.Word.score pairs with the sentence's window k."""
    out = []
    for e, segments in zip(examples, translated_segments(path, [e.words for e in examples], tokenizer)):
        out += [Example(id=f"{e.id}#{k}" if k else e.id, lang=source, text=" ".join(words), words=words, where=f"{path}:{number}")
                for k, (number, words) in enumerate(segments)]
    return out


class FilterTranslations:
    """What XTREME's word-tagging layouts (XtremeUdpos, Panx) read of FILTER's translations in
    <data>/filter-translations/: a target's training examples are the source's training sentences
    translated (train-<source>-<lang>.tsv), where the file is there, and the test texts'
    translations into the source language are test-<lang>-<source>.tsv (--test-translations'
    default). Their segments are counted with the run's tokenizer (Layout.tokenizer)."""
    translations = "FILTER's Microsoft Translator translations, filter-translations/train-en-<lang>.tsv (python download.py filter-translations)"
    labelled_translations = False

    def translation_file(self, lang):
        return self.directory / FOLDER / f"train-{self.source}-{lang}.tsv"

    def split_file(self, lang, split):
        return self.translation_file(lang) if split == "train" and lang != self.source else super().split_file(lang, split)

    def read_translations(self, lang):
        """A target's training examples: FILTER's translations of the source's, or none where its file is not there."""
        path = self.translation_file(lang)
        if not path.is_file():
            return []
        if self.tokenizer is None:
            raise InputError(f"{path}: FILTER's translations are aligned with the segments XTREME's preprocessing cuts the "
                             "sentences into, which a tokenizer counts: load the task with the run's (load_task(..., tokenizer=))")
        sources = self.source_train()
        return read_training_translations(path, lang, sources, self.tokenizer)

    def test_translations(self):
        folder = self.directory / FOLDER if self.directory else None
        if folder and any(folder.glob(f"test-*-{self.source}.tsv")):
            return str(folder / f"test-{{lang}}-{self.source}.tsv")
        return super().test_translations()
