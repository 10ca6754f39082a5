"""FILTER's translations of XTREME's UD-POS and PAN-X (train-en-<lang>.tsv, {dev,test}-<lang>-en.tsv: a segment a
line, untagged) and the segments XTREME's preprocessing cuts sentences into, which they align with (docs/data.md)."""
from data import Example
from minxlt.errors import DataError
from minxlt.tasks.readers import read_lines

FOLDER = "filter-translations"  # where download.py filter-translations puts them, in the task's data folder
PROCESSED_LENGTH = 128  # XTREME's preprocess_{udpos,panx}.sh, MAXL=128
SPECIALS = 3  # XTREME's utils_preprocess.py: XLMRobertaTokenizer's special_tokens_count


def xtreme_segments(words, tokenizer):
    """The word counts of the segments XTREME's preprocessing cuts a sentence into (125 sub-words at most)."""
    budget = PROCESSED_LENGTH - SPECIALS
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
    """[[(line, words)] of each sentence's segments], each segment with its line's words (an empty line: its own)."""
    if tokenizer is None:
        raise DataError(path, 0, "FILTER's translations are aligned with the segments XTREME's preprocessing cuts "
                                 "the sentences into, which a tokenizer counts: read them with the run's "
                                 "(load_task(..., tokenizer=), read_translations(..., tokenizer=))")
    lines, cuts = read_lines(path), [xtreme_segments(words, tokenizer) for words in sentences]
    count = sum(len(sizes) for sizes in cuts)
    if len(lines) != count:
        raise DataError(path, min(len(lines), count) + 1,
                        f"{len(lines)} lines for the {count} segments that XTREME's preprocessing cuts the "
                        f"{len(sentences)} sentences into (at most {PROCESSED_LENGTH - SPECIALS} of the tokenizer's "
                        "sub-words each): FILTER's translations are line-aligned with those segments "
                        "(utils_tag.py:76-91); check that the file translates this split of this language, and that "
                        "the model's tokenizer is XLM-R's, with which XTREME's preprocessing counted them")
    out, at = [], 0
    for words, sizes in zip(sentences, cuts):
        segments, start = [], 0
        for size in sizes:
            number, line = lines[at]
            segments.append((number, line.split() or words[start:start + size]))
            start, at = start + size, at + 1
        out.append(segments)
    return out


def read_test_translations(path, source, examples, tokenizer):
    """A split's sentences translated into `source`, segment k > 0 under "<id>#<k>" (levels.Word.score's window k)."""
    out = []
    for e, segments in zip(examples, translated_segments(path, [e.words for e in examples], tokenizer)):
        out += [Example(id=f"{e.id}#{k}" if k else e.id, lang=source, text=" ".join(words), words=words,
                        where=f"{path}:{number}") for k, (number, words) in enumerate(segments)]
    return out


class FilterTranslations:
    """FILTER's translations in <data>/filter-translations/ as XTREME's tagging layouts read them."""
    translations = ("FILTER's Microsoft Translator translations, filter-translations/train-en-<lang>.tsv "
                    "(python download.py filter-translations)")
    labelled_translations = False
    test_translation_files = (f"{FOLDER}/test-{{lang}}-{{source}}.tsv", "translate-test/test-{lang}-en-translated.tsv")

    def translation_file(self, lang):
        return self.directory / FOLDER / f"train-{self.source}-{lang}.tsv"

    def split_file(self, lang, split):
        return (self.translation_file(lang) if split == "train" and lang != self.source
                else super().split_file(lang, split))

    def read_translations(self, lang):
        """FILTER's translations of the source's (train-en-<lang>.tsv): segments joined, ids kept; none without it."""
        path = self.translation_file(lang)
        if not path.is_file():
            return []
        sources, out = self.source_train(), []
        for e, segments in zip(sources, translated_segments(path, [e.words for e in sources], self.tokenizer)):
            words = [w for _, segment in segments for w in segment]
            out.append(Example(id=e.id, lang=lang, text=" ".join(words), words=words, where=f"{path}:{segments[0][0]}"))
        return out
