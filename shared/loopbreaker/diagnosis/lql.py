"""A syntax checker (and small parser) for the Cloud Logging query language.

It covers the boolean/comparison grammar of the Logging query language:

    query       = [ expression ]
    expression  = term { [ "AND" ] term }             (juxtaposition is an implicit AND)
    term        = factor { "OR" factor }              (OR binds tighter than AND)
    factor      = ( "NOT" | "-" ) factor | "(" expression ")" | comparison | restriction
    comparison  = ( field | call ) op value_expr      op: = != > < >= <= : =~ !~
    restriction = call | value                        (a global restriction)
    value_expr  = value | "(" value_list ")"          value_list: values with AND/OR/NOT
    field       = segment { "." segment }             segment: name or "quoted string"
    call        = name "(" [ arg { "," arg } ] ")"    log_id("x"), sample(insertId, 0.1)

Comments run from ``--`` to the end of the line. Unquoted text must not contain special
characters (``insertId = abc:def`` is illegal; quote it). Errors carry the offset, line and
column. Pure: stdlib only.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto

from loopbreaker.errors import InvalidInput

OPERATORS = ("=", "!=", ">", "<", ">=", "<=", ":", "=~", "!~")
KEYWORDS = ("AND", "OR", "NOT")
# Characters that end unquoted text; everything else (letters, digits, . _ - / * @ ...) is
# part of a word.
_SPECIAL = frozenset('()"=<>!~:,')


class LqlSyntaxError(InvalidInput):
    """A Logging query that the Logging API would reject as malformed."""

    def __init__(self, message: str, text: str, offset: int) -> None:
        offset = max(0, min(offset, len(text)))
        line = text.count("\n", 0, offset) + 1
        column = offset - (text.rfind("\n", 0, offset) + 1) + 1
        super().__init__(f"{message} (line {line}, column {column})")
        self.message = message
        self.offset = offset
        self.line = line
        self.column = column


# --- syntax tree ---------------------------------------------------------------------


@dataclass(frozen=True)
class Value:
    text: str
    quoted: bool
    offset: int


@dataclass(frozen=True)
class ValueList:
    """A parenthesised value expression: ``("a" OR "b")``."""

    op: str  # "AND", "OR" or "NOT"
    items: tuple[ValueNode, ...]


ValueNode = Value | ValueList


@dataclass(frozen=True)
class FieldPath:
    segments: tuple[str, ...]
    offset: int

    @property
    def dotted(self) -> str:
        return ".".join(self.segments)


@dataclass(frozen=True)
class Call:
    name: str
    args: tuple[FieldPath | Value, ...]
    offset: int


@dataclass(frozen=True)
class Comparison:
    left: FieldPath | Call
    op: str
    value: ValueNode


@dataclass(frozen=True)
class Restriction:
    """A global restriction: a bare value or a function call."""

    target: Value | Call


@dataclass(frozen=True)
class BoolOp:
    op: str  # "AND" or "OR"
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Not:
    item: Expr


Expr = Comparison | Restriction | BoolOp | Not


# --- lexer ---------------------------------------------------------------------------


class _Kind(Enum):
    LPAREN = auto()
    RPAREN = auto()
    COMMA = auto()
    OP = auto()
    STRING = auto()
    WORD = auto()
    MINUS = auto()
    EOF = auto()


@dataclass(frozen=True)
class _Token:
    kind: _Kind
    text: str  # unescaped for STRING, raw otherwise
    offset: int
    end: int
    #: For words that are field paths with quoted segments (labels."k8s-pod/x").
    segments: tuple[str, ...] = ()

    @property
    def keyword(self) -> str | None:
        return self.text if self.kind is _Kind.WORD and self.text in KEYWORDS else None


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if text.startswith("--", i):
            newline = text.find("\n", i)
            i = n if newline < 0 else newline + 1
            continue
        if ch == "(":
            out.append(_Token(_Kind.LPAREN, ch, i, i + 1))
            i += 1
        elif ch == ")":
            out.append(_Token(_Kind.RPAREN, ch, i, i + 1))
            i += 1
        elif ch == ",":
            out.append(_Token(_Kind.COMMA, ch, i, i + 1))
            i += 1
        elif ch in "=<>!~:":
            two = text[i : i + 2]
            if two in OPERATORS:
                out.append(_Token(_Kind.OP, two, i, i + 2))
                i += 2
            elif ch in OPERATORS:
                out.append(_Token(_Kind.OP, ch, i, i + 1))
                i += 1
            else:
                raise LqlSyntaxError(f"unknown operator {ch!r}", text, i)
        elif ch == '"':
            value, end = _string(text, i)
            out.append(_Token(_Kind.STRING, value, i, end))
            i = end
        elif ch == "-" and i + 1 < n and text[i + 1] in '("':
            out.append(_Token(_Kind.MINUS, ch, i, i + 1))
            i += 1
        else:
            token = _word(text, i)
            out.append(token)
            i = token.end
    out.append(_Token(_Kind.EOF, "", n, n))
    return out


def _string(text: str, start: int) -> tuple[str, int]:
    """Read a double-quoted string at ``start``; return (unescaped value, end offset)."""
    chars: list[str] = []
    i = start + 1
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            if i + 1 >= len(text):
                break
            chars.append(text[i + 1])
            i += 2
            continue
        if ch == '"':
            return "".join(chars), i + 1
        chars.append(ch)
        i += 1
    raise LqlSyntaxError("unterminated string", text, start)


def _word(text: str, start: int) -> _Token:
    """Unquoted text; a ``."quoted"`` continuation makes it a field path segment."""
    segments: list[str] = []
    current: list[str] = []
    i = start
    quoted_seen = False
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            current.append(text[i + 1])
            i += 2
            continue
        if ch == '"' and i > start and text[i - 1] == ".":
            value, i = _string(text, i)
            segments.append(value)
            quoted_seen = True
            if i < len(text) and text[i] == ".":
                i += 1
                continue
            break
        if ch.isspace() or ch in _SPECIAL:
            break
        if ch == ".":
            segments.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    if current or not quoted_seen:
        segments.append("".join(current))
    raw = text[start:i]
    if not raw:
        raise LqlSyntaxError(f"unexpected character {text[start]!r}", text, start)
    return _Token(_Kind.WORD, raw, start, i, tuple(segments))


# --- parser --------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.pos = 0

    def peek(self, ahead: int = 0) -> _Token:
        return self.tokens[min(self.pos + ahead, len(self.tokens) - 1)]

    def next(self) -> _Token:
        token = self.peek()
        self.pos += 1
        return token

    def fail(self, message: str, token: _Token | None = None) -> LqlSyntaxError:
        offset = (token or self.peek()).offset
        return LqlSyntaxError(message, self.text, offset)

    # query / expression / term / factor

    def parse(self) -> Expr | None:
        if self.peek().kind is _Kind.EOF:
            return None
        expr = self.expression()
        token = self.peek()
        if token.kind is _Kind.RPAREN:
            raise self.fail("unexpected ')' without a matching '('")
        if token.kind is not _Kind.EOF:  # pragma: no cover - expression() consumes all
            raise self.fail(f"unexpected {token.text!r}")
        return expr

    def starts_term(self, token: _Token) -> bool:
        if token.kind in (_Kind.LPAREN, _Kind.STRING, _Kind.MINUS):
            return True
        return token.kind is _Kind.WORD and token.keyword in (None, "NOT")

    def expression(self) -> Expr:
        items = [self.term()]
        while True:
            token = self.peek()
            if token.keyword == "AND":
                self.next()
                items.append(self.term(after=token))
            elif self.starts_term(token):
                items.append(self.term())
            elif token.kind is _Kind.OP:
                raise self.fail(
                    f"comparison operator {token.text!r} without a field; quote values that "
                    "contain special characters"
                )
            elif token.kind is _Kind.COMMA:
                raise self.fail("unexpected ','")
            else:
                break
        return items[0] if len(items) == 1 else BoolOp("AND", tuple(items))

    def term(self, after: _Token | None = None) -> Expr:
        items = [self.factor(after)]
        while self.peek().keyword == "OR":
            op = self.next()
            items.append(self.factor(op))
        return items[0] if len(items) == 1 else BoolOp("OR", tuple(items))

    def factor(self, after: _Token | None = None) -> Expr:
        token = self.peek()
        if token.kind is _Kind.EOF or token.kind is _Kind.RPAREN or token.keyword in ("AND", "OR"):
            if after is not None:
                raise self.fail(f"dangling {after.text}: expected a comparison after it", after)
            if token.kind is _Kind.RPAREN:
                raise self.fail("unexpected ')' without a matching '('")
            raise self.fail(f"expected a comparison, found {token.text or 'end of query'!r}")
        if token.keyword == "NOT" or token.kind is _Kind.MINUS:
            self.next()
            return Not(self.factor(token))
        if token.kind is _Kind.WORD and token.text.startswith("-") and len(token.text) > 1:
            # "-field=value": negation glued to the next word.
            self.next()
            self.tokens.insert(self.pos, _strip_minus(token))
            return Not(self.factor(token))
        if token.kind is _Kind.LPAREN:
            self.next()
            if self.peek().kind is _Kind.RPAREN:
                raise self.fail("empty parentheses", token)
            inner = self.expression()
            closing = self.peek()
            if closing.kind is not _Kind.RPAREN:
                if closing.kind is _Kind.EOF:
                    raise self.fail("unbalanced parentheses: '(' is never closed", token)
                raise self.fail(f"expected ')', found {closing.text!r}")  # pragma: no cover
            self.next()
            return inner
        if token.kind is _Kind.OP:
            raise self.fail(f"comparison operator {token.text!r} without a field")
        if token.kind is _Kind.COMMA:
            raise self.fail("unexpected ','")
        return self.comparison()

    def comparison(self) -> Expr:
        token = self.next()
        following = self.peek()
        if (
            token.kind is _Kind.WORD
            and following.kind is _Kind.LPAREN
            and following.offset == token.end
        ):
            call = self.call(token)
            op = self.peek()
            if op.kind is not _Kind.OP:
                return Restriction(call)
            self.next()
            return Comparison(call, op.text, self.value_expr(op))
        if following.kind is not _Kind.OP:
            return Restriction(Value(token.text, token.kind is _Kind.STRING, token.offset))
        if token.kind is _Kind.STRING:
            raise self.fail("a quoted string cannot be compared; use a field name", token)
        left = self.field(token)
        op = self.next()
        return Comparison(left, op.text, self.value_expr(op))

    def field(self, token: _Token) -> FieldPath:
        if any(segment == "" for segment in token.segments):
            raise self.fail(f"empty segment in field path {token.text!r}", token)
        return FieldPath(token.segments, token.offset)

    def call(self, name: _Token) -> Call:
        if not name.text.replace("_", "a").isalnum():
            raise self.fail(f"bad function name {name.text!r}", name)
        opening = self.next()
        args: list[FieldPath | Value] = []
        if self.peek().kind is _Kind.RPAREN:
            self.next()
            return Call(name.text, (), name.offset)
        while True:
            arg = self.next()
            if arg.kind is _Kind.STRING:
                args.append(Value(arg.text, True, arg.offset))
            elif arg.kind is _Kind.WORD and arg.keyword is None:
                args.append(self.field(arg))
            elif arg.kind is _Kind.EOF:
                raise self.fail(
                    f"unbalanced parentheses: call of {name.text} is never closed", opening
                )
            else:
                raise self.fail(f"expected an argument of {name.text}(), found {arg.text!r}", arg)
            sep = self.next()
            if sep.kind is _Kind.RPAREN:
                return Call(name.text, tuple(args), name.offset)
            if sep.kind is _Kind.EOF:
                raise self.fail(
                    f"unbalanced parentheses: call of {name.text} is never closed", opening
                )
            if sep.kind is not _Kind.COMMA:
                raise self.fail(f"expected ',' or ')' in {name.text}(), found {sep.text!r}", sep)

    # values

    def value_expr(self, op: _Token) -> ValueNode:
        token = self.peek()
        if token.kind is _Kind.LPAREN:
            self.next()
            if self.peek().kind is _Kind.RPAREN:
                raise self.fail("empty value list", token)
            node = self.value_and(op)
            closing = self.next()
            if closing.kind is not _Kind.RPAREN:
                if closing.kind is _Kind.EOF:
                    raise self.fail("unbalanced parentheses: value list is never closed", token)
                raise self.fail(f"expected ')' in value list, found {closing.text!r}", closing)
            return node
        return self.value(op)

    def value(self, op: _Token) -> Value:
        token = self.peek()
        if token.kind is _Kind.STRING:
            self.next()
            return Value(token.text, True, token.offset)
        if token.kind is _Kind.WORD and token.keyword is None:
            self.next()
            if self.peek().kind is _Kind.OP and self.peek().offset == token.end:
                raise self.fail(
                    f"unquoted value {token.text!r} is followed by {self.peek().text!r}; "
                    "quote values that contain special characters"
                )
            return Value(token.text, False, token.offset)
        found = "end of query" if token.kind is _Kind.EOF else repr(token.text)
        raise self.fail(f"missing value after {op.text!r} (found {found})", op)

    def value_and(self, op: _Token) -> ValueNode:
        items = [self.value_or(op)]
        while True:
            token = self.peek()
            if token.keyword == "AND":
                self.next()
                items.append(self.value_or(token))
            elif token.kind in (_Kind.STRING, _Kind.WORD) and token.keyword in (None, "NOT"):
                items.append(self.value_or(op))
            else:
                break
        return items[0] if len(items) == 1 else ValueList("AND", tuple(items))

    def value_or(self, op: _Token) -> ValueNode:
        items = [self.value_not(op)]
        while self.peek().keyword == "OR":
            items.append(self.value_not(self.next()))
        return items[0] if len(items) == 1 else ValueList("OR", tuple(items))

    def value_not(self, op: _Token) -> ValueNode:
        if self.peek().keyword == "NOT":
            token = self.next()
            return ValueList("NOT", (self.value_not(token),))
        token = self.peek()
        if token.kind is _Kind.RPAREN or token.kind is _Kind.EOF or token.keyword:
            raise self.fail(f"dangling {op.text}: expected a value after it", op)
        return self.value(op)


def _strip_minus(token: _Token) -> _Token:
    segments = (token.segments[0][1:], *token.segments[1:]) if token.segments else ()
    return _Token(token.kind, token.text[1:], token.offset + 1, token.end, segments)


def parse(text: str) -> Expr | None:
    """Parse a Logging query; ``None`` for an empty query. Raises LqlSyntaxError."""
    return _Parser(text).parse()


def check(text: str) -> None:
    """Raise LqlSyntaxError when ``text`` is not a well-formed Logging query."""
    parse(text)


def warnings(text: str) -> list[str]:
    """Legal but suspicious constructs (lower-case boolean words are searched as text)."""
    out = []
    for token in _tokens(text):
        if token.kind is _Kind.WORD and token.text in ("and", "or", "not"):
            out.append(
                f"lower-case {token.text!r} at offset {token.offset} is searched as text; "
                f"write {token.text.upper()} for the boolean operator"
            )
    return out
