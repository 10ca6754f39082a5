"""MARC (Keung et al. 2020): reviews in six languages with their stars, as released (JSON lines); `marc` is the
binarized task Yu & Joty read (Sec. 4.1: negative 1-2 stars, positive 4-5), `marc-stars` the five ratings."""
import json

from data import Example, Layout
from minxlt.errors import DataError
from minxlt.tasks.readers import UniqueIds, read_lines

MARC_LANGS = ["en", "de", "es", "fr", "ja", "zh"]
BINARY = {1: "negative", 2: "negative", 4: "positive", 5: "positive"}  # Keung et al.'s binarized task: no 3 stars
RATINGS = {str(n): n for n in range(1, 6)}  # stars as the release writes them


def each_marc(path, lang, labels):
    """A file's reviews, one at a time, labelled `labels[stars]` (a rating not in `labels` is left out)."""
    ids = UniqueIds(path, "review_id")
    for line, text in read_lines(path):
        try:
            row = json.loads(text)
            review, stars, body, language = row["review_id"], row["stars"], row["review_body"], row["language"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise DataError(path, line, f"not a JSON object with review_id, stars, review_body and language "
                                        f"({e!r})") from None
        rating = RATINGS.get(str(stars)) if type(stars) in (str, int) else None  # "5" as released, 5 as the hub has it
        if not isinstance(review, str) or not review or rating is None:
            raise DataError(path, line, f"review_id {review!r} or stars {stars!r} is not a review's "
                                        "(stars: \"1\" to \"5\", or 1 to 5)")
        if not isinstance(body, str) or not body.strip():
            raise DataError(path, line, f"review {review!r} has an empty review_body")
        if language != lang:
            raise DataError(path, line, f"review {review!r} is in language {language!r}, in the file of {lang!r}")
        ids.check(line, review)
        if rating in labels:
            yield Example(id=review, lang=lang, text=body.strip(), label=labels[rating], where=f"{path}:{line}")


class Marc(Layout):
    """<data>/{train,dev,test}/dataset_<lang>_<split>.json, or in <data>; no translations (co-training's pool)."""
    langs, labels, pattern = (MARC_LANGS, ["negative", "positive"],
                              "{train,dev,test}/dataset_<lang>_{train,dev,test}.json")
    stars = BINARY
    parallel = False
    paired_train = False
    translations = "none: MARC's languages have their own reviews, no translations"

    def found(self):
        named = [*self.directory.glob("train/dataset_*_train.json"), *self.directory.glob("dataset_*_train.json")]
        return {lang for lang in (p.name[len("dataset_"):-len("_train.json")] for p in named)
                if all(self.split_file(lang, split).is_file() for split in ("dev", "test"))}

    def split_file(self, lang, split):
        nested = self.directory / split / f"dataset_{lang}_{split}.json"
        return nested if nested.is_file() else self.directory / f"dataset_{lang}_{split}.json"

    def stream(self, lang):
        return each_marc(self.split_file(lang, "train"), lang, self.stars)

    def read(self, lang, split):
        return self.once((lang, split), lambda: list(each_marc(self.split_file(lang, split), lang, self.stars)))

    def train_files(self, lang):
        return [self.split_file(lang, "train")]


class MarcStars(Marc):
    """MARC's five star ratings, every review."""
    labels = ["1", "2", "3", "4", "5"]
    stars = {n: str(n) for n in range(1, 6)}
