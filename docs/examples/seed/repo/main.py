import sys


def main():
    return len(sys.argv)
