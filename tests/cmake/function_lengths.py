#!/usr/bin/env python3
"""Lists the C++ functions longer than --max lines (signature to closing brace).

usage: function_lengths.py [--max N] PATH...   (a directory is searched for *.cpp, *.hpp, *.h)
       function_lengths.py --self-test

Prints `file:line name length` for each function over the limit and exits 1 if there is one.
A function is a body at namespace or class scope: free and member functions (also those defined
in a class body); a lambda counts toward the function that encloses it. The scan matches braces
after blanking comments, string and character literals (raw strings too) and preprocessor lines;
it does not parse C++, so a brace that a macro opens or closes alone can mislead it.
"""
import os
import re
import sys

IDENT = re.compile(r"[A-Za-z_]\w*")


def blank(text):
    """text with comments, literals and preprocessor lines replaced by spaces (newlines kept)."""
    out = list(text)
    n = len(text)
    i = 0
    line_start = True

    def wipe(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if c == "\n":
            line_start = True
            i += 1
            continue
        if line_start and c == "#":  # a directive, with its continuation lines
            j = i
            while j < n and not (text[j] == "\n" and text[j - 1] != "\\"):
                if text.startswith("/*", j):  # a block comment may run past the directive's line
                    end = text.find("*/", j + 2)
                    j = n if end < 0 else end + 2
                    continue
                j += 1
            wipe(i, j)
            i = j
            continue
        if not c.isspace():
            line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            wipe(i, j)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            wipe(i, j)
            i = j
        elif c == '"':
            k = i - 1  # R"delim( ... )delim", with an optional u8/u/U/L prefix before the R
            if k >= 0 and text[k] == "R" and (k == 0 or not (text[k - 1].isalnum() or text[k - 1] == "_")
                                              or text[max(0, k - 2):k] == "u8" or text[k - 1] in "uUL"):
                open_paren = text.find("(", i)
                delim = text[i + 1:open_paren]
                end = text.find(")" + delim + '"', open_paren)
                j = n if end < 0 else end + len(delim) + 2
            else:
                j = i + 1
                while j < n and text[j] != '"':
                    j += 2 if text[j] == "\\" else 1
                j += 1
            wipe(i + 1, min(j, n) - 1)
            i = j
        elif c == "'":
            k = i  # a digit separator (1'000) is not a literal: its token starts with a digit
            while k > 0 and (text[k - 1].isalnum() or text[k - 1] in "_'."):
                k -= 1
            if k < i and text[k].isdigit():
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != "'":
                j += 2 if text[j] == "\\" else 1
            wipe(i + 1, min(j, n))
            i = j + 1
        else:
            i += 1
    return "".join(out)


def strip_prefix(head):
    """head without leading access labels, attributes and template parameter lists."""
    while True:
        h = head.lstrip()
        m = re.match(r"(public|private|protected)\s*:(?!:)", h)
        if m:
            head = h[m.end():]
            continue
        if h.startswith("[["):
            end = h.find("]]")
            head = h[end + 2:] if end >= 0 else ""
            continue
        m = re.match(r"template\s*<", h)
        if m:
            depth, j = 1, m.end()
            while j < len(h) and depth:
                depth += {"<": 1, ">": -1}.get(h[j], 0)
                j += 1
            head = h[j:]
            continue
        return h


def top_level(head):
    """head with everything inside (), [] and <> of operator names removed: the parts at depth 0."""
    head = re.sub(r"\boperator\s*(\(\s*\)|\[\s*\]|[^\s(]+)", "operator", head)
    out, depth = [], 0
    for ch in head:
        if ch in "([":
            depth += 1
            if depth == 1:
                out.append(ch)
        elif ch in ")]":
            depth -= 1
            if depth == 0:
                out.append(ch)
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def classify(head, prev):
    """What a `{` opens at namespace or class scope: namespace, class, function or other."""
    h = strip_prefix(head)
    flat = top_level(h)
    if re.match(r"(inline\s+)?namespace\b", h) or re.match(r'extern\s*"', h):
        return "namespace"
    if "(" not in flat:
        if re.search(r"\b(class|struct|union)\b", flat) and not re.search(r"\benum\b", flat) \
                and "=" not in flat:
            return "class"
        return "other"
    before_params = flat[:flat.find("(")]
    if re.search(r"(?<![=!<>])=(?!=)", before_params) or re.search(r"\b(return|enum)\b", before_params):
        return "other"
    after_params = flat[flat.find(")") + 1:]
    if re.match(r"\s*(const\b|noexcept\b|override\b|final\b|mutable\b|&|->|\(|\)|\s)*:(?!:)", after_params):
        # a constructor's initializer list: `x_{...}` is a member's initializer, not the body
        return "function" if prev in ")}" else "other"
    return "function"


def function_name(head):
    flat = top_level(strip_prefix(head))
    before = flat[:flat.find("(")].rstrip()
    m = re.search(r"((?:[A-Za-z_]\w*\s*(?:<[^<>]*>)?\s*::\s*)*~?(?:operator|[A-Za-z_]\w*))\s*$", before)
    return re.sub(r"\s+", "", m.group(1)) if m else before.split()[-1] if before.split() else "?"


def functions(text):
    """(line, name, length) of each function body at namespace or class scope in text."""
    src = blank(text)
    line_of = [0] * (len(src) + 1)
    line = 1
    for i, ch in enumerate(src):
        line_of[i] = line
        if ch == "\n":
            line += 1
    line_of[len(src)] = line
    found = []
    stack = []  # kinds of the open braces
    head_start = 0  # where the declaration before the next `{` begins
    paren = 0
    i, n = 0, len(src)
    while i < n:
        ch = src[i]
        in_code_scope = not stack or stack[-1] in ("namespace", "class")
        if not in_code_scope:
            if ch == "{":
                stack.append(stack[-1] if stack[-1] != "function" else "block")
            elif ch == "}":
                kind = stack.pop()
                if kind == "function":
                    begin = head_start + len(src[head_start:]) - len(src[head_start:].lstrip())
                    found.append((line_of[begin], fn_name, line_of[i] - line_of[begin] + 1))
                    head_start = i + 1
                elif kind == "other" and (not stack or stack[-1] in ("namespace", "class")):
                    pass  # an initializer: the declaration goes on
            i += 1
            continue
        if ch in "([":
            paren += 1
        elif ch in ")]":
            paren = max(0, paren - 1)
        elif ch == ";" and paren == 0:
            head_start = i + 1
        elif ch == "{":
            if paren:
                stack.append("other")
            else:
                head = src[head_start:i]
                prev = head.rstrip()[-1:] if head.strip() else ""
                kind = classify(head, prev)
                if kind == "function":
                    fn_name = function_name(head)
                    stack.append("function")
                else:
                    stack.append(kind)
                    if kind in ("namespace", "class"):
                        head_start = i + 1
        elif ch == "}":
            if stack:
                stack.pop()
            head_start = i + 1
        i += 1
    return found


def sources(paths):
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs.sort()
                for f in sorted(files):
                    if f.endswith((".cpp", ".hpp", ".h")):
                        yield os.path.join(root, f)
        else:
            yield p


def self_test():
    sample = (
        'namespace a {\n'
        'struct S : B {\n'
        '  int x_{1};\n'
        '  S(int v) : x_{v}, y_(v) {\n'
        '    auto f = [&] { return "}"; };\n'
        '  }\n'
        '  void g() const { char c = \'}\'; int k = 1\'000; }\n'
        '};\n'
        'const char* r = R"x( } { )x";\n'
        'template <class T> std::vector<T> h(T t) {\n'
        '  // }\n'
        '  /* { */ return {t};\n'
        '}\n'
        'int tbl[] = {1, 2};\n'
        'bool operator==(const S&, const S&) {\n'
        '  return true;\n'
        '}\n'
        '}  // namespace a\n'
        '#define OPEN {\n'
        'int main() {\n'
        '  if (x) { y(); }\n'
        '}\n')
    got = functions(sample)
    want = [(4, "S", 3), (7, "g", 1), (10, "h", 4), (15, "operator", 3), (20, "main", 3)]
    if got != want:
        print(f"self-test failed:\n got  {got}\n want {want}")
        return 1
    # A lambda's lines count toward the function around it: 2 + 88 + 3 lines.
    long_fn = "int run() {\n  auto f = [&] {\n" + "    x();\n" * 88 + "  };\n  return f();\n}\n"
    if functions(long_fn) != [(1, "run", 93)]:
        print(f"self-test failed: a 93-line function with a lambda gave {functions(long_fn)}")
        return 1
    print("self-test passed")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    limit = 80
    args = argv[1:]
    if len(args) >= 2 and args[0] == "--max":
        limit = int(args[1])
        args = args[2:]
    if not args:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    long_ones = []
    for path in sources(args):
        with open(path, encoding="utf-8") as f:
            for line, name, length in functions(f.read()):
                if length > limit:
                    long_ones.append(f"{path}:{line} {name} {length}")
    for entry in long_ones:
        print(entry)
    if long_ones:
        print(f"{len(long_ones)} function(s) over {limit} lines")
        return 1
    print(f"no function over {limit} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
