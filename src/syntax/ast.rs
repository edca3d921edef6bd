//! The syntax tree: a plain value. Every node carries its span; facts about nodes
//! (types, resolved symbols) live in side tables keyed by `ExprId`, never in the tree.

use serde::Serialize;

/// A byte range in one source file. `file` indexes `diag::Sources`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Default)]
pub struct Span {
    pub file: u32,
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(file: u32, start: usize, end: usize) -> Span {
        Span { file, start: start as u32, end: end as u32 }
    }
    /// The smallest span that covers both.
    pub fn to(self, other: Span) -> Span {
        Span { file: self.file, start: self.start.min(other.start), end: self.end.max(other.end) }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Script {
    pub items: Vec<Item>,
    /// `param NAME = VALUE` declarations, in source order. Kept apart from `items`: they
    /// are settings, not code, and are replaced by their values before checking.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub params: Vec<Param>,
}

/// `param threshold = 50ms`: a setting of a script or library, with its default value;
/// `--set threshold=100ms` overrides it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Param {
    pub name: Ident,
    pub value: Expr,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Item {
    Use(Use),
    Fn(FnDef),
    Probe(Probe),
}

/// `use "http"`
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Use {
    pub name: String,
    pub span: Span,
}

/// `fn slow(d) = d > 10ms` or `fn f(a, b) { ... }`
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FnDef {
    pub name: Ident,
    pub params: Vec<Ident>,
    pub body: FnBody,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum FnBody {
    Expr(Expr),
    Block(Block),
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Probe {
    pub kind: ProbeKind,
    pub body: Block,
    /// The probe's header, `on return main.F`: where probe-level errors point.
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum ProbeKind {
    Entry(Vec<SymbolPattern>),
    Return(Vec<SymbolPattern>),
    /// `on panic F`: a call of F that a panic ends without a RET.
    Panic(Vec<SymbolPattern>),
    Begin,
    End,
    /// `on interval 1s`: the period in nanoseconds.
    Interval {
        nanos: u64,
        span: Span,
    },
    /// `on line "main.go:42"`: where that source line starts.
    Line(LineSpec),
}

/// A source line as written: `"server/handler.go:42"` is the file `server/handler.go`
/// (a suffix of a path the binary's line table names) and line 42.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LineSpec {
    pub file: String,
    pub line: u32,
    /// The quoted text.
    pub span: Span,
}

/// A function name as written: bare (`main.doWork`) or quoted (`"net/http.(*conn).serve"`),
/// possibly with `*` wildcards. `text` is without quotes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SymbolPattern {
    pub text: String,
    pub quoted: bool,
    pub span: Span,
}

impl SymbolPattern {
    /// Whether the pattern holds a `*` wildcard. The `*` of a pointer receiver, `(*T)`,
    /// is part of the name, not a wildcard.
    pub fn is_wildcard(&self) -> bool {
        let t = self.text.as_bytes();
        self.quoted
            && (0..t.len()).any(|i| {
                let receiver = i > 0
                    && t[i - 1] == b'('
                    && t.get(i + 1).is_some_and(|n| n.is_ascii_alphabetic() || *n == b'_' || *n >= 0x80);
                t[i] == b'*' && !receiver
            })
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Block {
    pub stmts: Vec<Stmt>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum StmtKind {
    /// `x := expr`
    Let {
        name: Ident,
        value: Expr,
    },
    /// `self.name = expr`
    AssignSelf {
        name: Ident,
        value: Expr,
    },
    /// `@m[k1, k2] = expr`, where expr may be an aggregation call such as `count()`.
    AssignMap {
        map: MapRef,
        value: Expr,
    },
    /// A call or expression as a statement: `hist(elapsed)`, `print(x)`, `exit()`.
    Expr(Expr),
    If {
        cond: Expr,
        then: Block,
        otherwise: Option<Else>,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Else {
    Block(Block),
    /// `else if ...`: a nested if statement.
    If(Box<Stmt>),
}

/// `@name[k1, k2]`; `name` is empty for the anonymous map `@`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MapRef {
    pub name: Ident,
    pub keys: Vec<Expr>,
    /// The name written before each key, `@m[method: x]`, or `None`: as long as `keys`.
    #[serde(skip_serializing_if = "unnamed")]
    pub names: Vec<Option<Ident>>,
    pub span: Span,
}

impl MapRef {
    /// A reference with unnamed keys.
    pub fn new(name: Ident, keys: Vec<Expr>, span: Span) -> MapRef {
        let names = vec![None; keys.len()];
        MapRef { name, keys, names, span }
    }
    /// The name written before key `i`, if any.
    pub fn key_name(&self, i: usize) -> Option<&Ident> {
        self.names.get(i).and_then(|n| n.as_ref())
    }
}

fn unnamed(names: &[Option<Ident>]) -> bool {
    names.iter().all(|n| n.is_none())
}

/// Identifies an expression node for side tables. Unique within one parsed file;
/// `syntax::parse` numbers them from a counter the caller passes, so several files
/// can share one numbering.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ExprId(pub u32);

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Expr {
    pub id: ExprId,
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum ExprKind {
    Int(u64),
    /// A floating-point literal as written, without `_`: `1.5`, `2e-3`, `1e9`. Kept as
    /// text so that a float32 gets the literal rounded once, as Go's constants do.
    Float(String),
    Str(String),
    Bool(bool),
    /// A duration literal, in nanoseconds: `250ns`, `5us`, `3ms`, `2s`.
    Duration(u64),
    /// A bare name: a parameter, a local, a builtin (`elapsed`, `goid`, `ret`, ...).
    Name(String),
    /// `self.name`
    SelfVar(String),
    /// `@m[k]` read as a value.
    Map(MapRef),
    /// `x.field` (also `arg.NAME`).
    Field {
        base: Box<Expr>,
        field: Ident,
    },
    /// `x.(*T)`: `x` (a machine word, a pointer or an interface's data) as a pointer to
    /// the Go type named `ty`, found in DWARF or the runtime's type data.
    Assert {
        base: Box<Expr>,
        ty: Ident,
    },
    /// `x[i]`
    Index {
        base: Box<Expr>,
        index: Box<Expr>,
    },
    Unary {
        op: UnOp,
        operand: Box<Expr>,
    },
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    /// `name(args...)`: builtins, aggregations, and `fn` helpers.
    Call {
        func: Ident,
        args: Vec<Expr>,
        /// The name written before each argument, `span(user: id)`, or `None`: as long
        /// as `args` (only `span` takes named arguments).
        #[serde(skip_serializing_if = "unnamed")]
        names: Vec<Option<Ident>>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum UnOp {
    Neg,
    Not,
    Deref,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        use BinOp::*;
        match self {
            Add => "+",
            Sub => "-",
            Mul => "*",
            Div => "/",
            Rem => "%",
            BitAnd => "&",
            BitOr => "|",
            BitXor => "^",
            Shl => "<<",
            Shr => ">>",
            Eq => "==",
            Ne => "!=",
            Lt => "<",
            Le => "<=",
            Gt => ">",
            Ge => ">=",
            And => "&&",
            Or => "||",
        }
    }
}
