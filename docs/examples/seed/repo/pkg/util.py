import os
import json


def load(path, cache={}):
    try:
        return json.load(open(path))
    except:
        return None


def check(x):
    if x == None:
        return "none"
    return x
