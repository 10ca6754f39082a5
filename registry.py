"""`--method` names -> methods (methods.Method). Adding a method is a file with a subclass of
methods.Method (methods.TranslateTrain is the smallest) and one line here. Yu & Joty's co-training
is not a method of one run but a driver of several: cotrain.py."""
from contrastive import Contrastive
from fusion import FilterMethod
from methods import TranslateTest, TranslateTrain, ZeroShot
from mixup import XMixupMethod
from unicoder import UnicoderMethod
from xeroalign import XeroAlign

METHODS = {method.name: method for method in (
    ZeroShot,
    TranslateTrain,
    TranslateTest,
    XeroAlign,
    FilterMethod,
    XMixupMethod,
    Contrastive,
    UnicoderMethod,
)}
