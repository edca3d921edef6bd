//! Reads a tests/cases/*.cases file into cases (the format is in tests/cases/README.md).
//! An error names the line; a file that does not parse fails every case in it.

use std::fmt;

/// One case: a script traced on a program, and what must hold of its output.
pub struct Case {
    pub name: String,
    /// The Go program under tests/go/, and the arguments it is started with.
    pub program: String,
    pub program_args: Vec<String>,
    /// Extra `go build` flags; several `build` lines: the case runs once per build.
    pub builds: Vec<Vec<String>>,
    /// Run once per toolchain (local, the oldest and the newest release), each built as a
    /// plain executable.
    pub toolchains: bool,
    /// Extra gtrace arguments, before `-e`.
    pub args: Vec<String>,
    pub script: String,
    pub expects: Vec<Expect>,
}

/// What is read from gtrace's output.
pub enum Measure {
    /// `@name[keys]`: the number printed for that map entry.
    Map(String),
    /// `lines "TEXT"`: how many printed lines are exactly TEXT.
    Lines(String),
    /// `lines starting "TEXT"`: how many printed lines start with TEXT.
    Starting(String),
    /// `truth KEY`: the program's own `KEY=N` (that what a case needs happened: a call
    /// returned on another thread).
    Truth(String),
}

/// How a measure compares with what it must be: `==`, or `>`, `>=`, `<`, `<=`.
#[derive(Clone, Copy)]
pub enum Op {
    Eq,
    Gt,
    Ge,
    Lt,
    Le,
}

impl Op {
    /// Each operator by its text, the two-character ones first.
    const ALL: [(&'static str, Op); 5] = [("==", Op::Eq), (">=", Op::Ge), ("<=", Op::Le), (">", Op::Gt), ("<", Op::Lt)];

    pub fn holds(self, got: i64, want: i64) -> bool {
        match self {
            Op::Eq => got == want,
            Op::Gt => got > want,
            Op::Ge => got >= want,
            Op::Lt => got < want,
            Op::Le => got <= want,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let text = match self {
            Op::Eq => "==",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Le => "<=",
        };
        write!(f, "{text}")
    }
}

/// What a measure must equal: a sum of terms, e.g. `truth sum_a + truth calls`.
pub struct Want(pub Vec<Term>);

/// `N`, `truth KEY` or `N * truth KEY`, added (or subtracted: a negative factor).
pub struct Term {
    pub factor: i64,
    /// `truth KEY`: the program's own `KEY=N`; None: the factor is the term.
    pub truth: Option<String>,
}

/// One expectation; `line` is where it is written.
pub enum Expect {
    Compare {
        measure: Measure,
        op: Op,
        want: Want,
        line: usize,
    },
    Printed {
        text: String,
        line: usize,
    },
    Contains {
        text: String,
        line: usize,
    },
    Lacks {
        text: String,
        line: usize,
    },
    Said {
        text: String,
        line: usize,
    },
    LinesAfter {
        prefix: String,
        lines: Vec<String>,
        line: usize,
    },
    /// `same "OURS" "THEIRS"`: the lines starting with OURS and those starting with
    /// THEIRS, each without its prefix and sorted, are equal and not none.
    Same {
        ours: String,
        theirs: String,
        line: usize,
    },
    /// `quiet "TEXT"`: stderr does not hold TEXT.
    Quiet {
        text: String,
        line: usize,
    },
}

impl fmt::Display for Measure {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Measure::Map(name) => write!(f, "{name}"),
            Measure::Lines(text) => write!(f, "the count of lines `{text}`"),
            Measure::Starting(text) => write!(f, "the count of lines starting `{text}`"),
            Measure::Truth(key) => write!(f, "truth {key}"),
        }
    }
}

impl fmt::Display for Want {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        for (i, term) in self.0.iter().enumerate() {
            let sign = if term.factor < 0 { "-" } else { "+" };
            match i {
                0 if term.factor < 0 => write!(f, "-")?,
                0 => {}
                _ => write!(f, " {sign} ")?,
            }
            match (&term.truth, term.factor.abs()) {
                (Some(key), 1) => write!(f, "truth {key}")?,
                (Some(key), n) => write!(f, "{n} * truth {key}")?,
                (None, n) => write!(f, "{n}")?,
            }
        }
        Ok(())
    }
}

/// Every case of a file.
pub fn cases(text: &str) -> Result<Vec<Case>, String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut cases: Vec<Case> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let (n, line) = (i + 1, lines[i]);
        i += 1;
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let (word, rest) = trimmed.split_once(' ').unwrap_or((trimmed, ""));
        if word == "case" {
            cases.push(new_case(rest.trim()));
            continue;
        }
        let case = cases.last_mut().ok_or(format!("line {n}: `{word}` before the first `case`"))?;
        match word {
            "program" => {
                let mut words = rest.split_whitespace().map(String::from);
                case.program = words.next().ok_or(format!("line {n}: `program` needs a name"))?;
                case.program_args = words.collect();
            }
            "build" => case.builds.push(words(rest, n)?),
            "toolchains" => case.toolchains = true,
            "args" => case.args = words(rest, n)?,
            "run" => {
                if !case.script.is_empty() {
                    case.script.push('\n');
                }
                case.script.push_str(rest.trim());
            }
            "expect" if rest.trim_end().ends_with(':') => {
                let (expect, used) = lines_after(rest, &lines[i..], n)?;
                case.expects.push(expect);
                i += used;
            }
            "expect" => case.expects.push(expectation(rest, n)?),
            "for" => case.expects.extend(repeated(rest, n)?),
            _ => {
                return Err(format!(
                    "line {n}: unknown `{word}` (case, program, build, toolchains, args, run, expect, for)"
                ))
            }
        }
    }
    for case in &cases {
        if case.program.is_empty() || case.script.is_empty() || case.expects.is_empty() {
            return Err(format!("case {} needs a program, a run and at least one expect", case.name));
        }
        if case.toolchains && !case.builds.is_empty() {
            return Err(format!("case {}: `toolchains` builds plain executables, without `build` flags", case.name));
        }
    }
    Ok(cases)
}

fn new_case(name: &str) -> Case {
    Case {
        name: name.to_string(),
        program: String::new(),
        program_args: Vec::new(),
        builds: Vec::new(),
        toolchains: false,
        args: Vec::new(),
        script: String::new(),
        expects: Vec::new(),
    }
}

/// `expect lines after "PREFIX":` and the indented lines under it.
fn lines_after(rest: &str, below: &[&str], n: usize) -> Result<(Expect, usize), String> {
    let head = rest.trim_end().trim_end_matches(':');
    let prefix = head.strip_prefix("lines after ").ok_or(format!("line {n}: expected `lines after \"PREFIX\":`"))?;
    let prefix = one_string(prefix, n)?;
    let indented: Vec<String> =
        below.iter().take_while(|l| l.starts_with("    ")).map(|l| l.trim_start().to_string()).collect();
    let used = indented.len();
    if used == 0 {
        return Err(format!("line {n}: `lines after` needs the lines expected, indented under it"));
    }
    Ok((Expect::LinesAfter { prefix, lines: indented, line: n }, used))
}

/// `for V in A B C: expect ...`: the expectation once for each value, `{V}` replaced.
fn repeated(rest: &str, n: usize) -> Result<Vec<Expect>, String> {
    let (head, body) = rest.split_once(':').ok_or(format!("line {n}: `for V in A B: expect ...`"))?;
    let mut words = head.split_whitespace();
    let var = words.next().ok_or(format!("line {n}: `for` needs a name"))?;
    if words.next() != Some("in") {
        return Err(format!("line {n}: `for {var} in ...`"));
    }
    let body = body.trim().strip_prefix("expect ").ok_or(format!("line {n}: `for ...: expect ...`"))?;
    let hole = format!("{{{var}}}");
    if !body.contains(&hole) {
        return Err(format!("line {n}: the expectation does not use {hole}: it would repeat the same check"));
    }
    words.map(|value| expectation(&body.replace(&hole, value), n)).collect()
}

/// `MEASURE OP WANT` (`@map`, `lines "TEXT"`, `lines starting "TEXT"`, `truth KEY`),
/// `printed "LINE"`, `contains "TEXT"`, `lacks "TEXT"`, `said "TEXT"`, `quiet "TEXT"`,
/// `same "OURS" "THEIRS"`.
fn expectation(rest: &str, n: usize) -> Result<Expect, String> {
    let rest = rest.trim();
    if let Some(text) = rest.strip_prefix("printed ") {
        return Ok(Expect::Printed { text: one_string(text, n)?, line: n });
    }
    if let Some(text) = rest.strip_prefix("contains ") {
        return Ok(Expect::Contains { text: one_string(text, n)?, line: n });
    }
    if let Some(text) = rest.strip_prefix("lacks ") {
        return Ok(Expect::Lacks { text: one_string(text, n)?, line: n });
    }
    if let Some(text) = rest.strip_prefix("said ") {
        return Ok(Expect::Said { text: one_string(text, n)?, line: n });
    }
    if let Some(text) = rest.strip_prefix("quiet ") {
        return Ok(Expect::Quiet { text: one_string(text, n)?, line: n });
    }
    if let Some(text) = rest.strip_prefix("same ") {
        let [ours, theirs]: [String; 2] =
            words(text, n)?.try_into().map_err(|_| format!("line {n}: `same \"OURS\" \"THEIRS\"`"))?;
        return Ok(Expect::Same { ours, theirs, line: n });
    }
    let found = Op::ALL.iter().find_map(|(text, op)| Some((rest.rsplit_once(&format!(" {text} "))?, *op)));
    let ((lhs, rhs), op) = found.ok_or(format!("line {n}: expected `MEASURE == WANT` (or >, >=, <, <=)"))?;
    let measure = match lhs.strip_prefix("lines ") {
        Some(text) => match text.strip_prefix("starting ") {
            Some(text) => Measure::Starting(one_string(text, n)?),
            None => Measure::Lines(one_string(text, n)?),
        },
        None if lhs.starts_with('@') => Measure::Map(lhs.to_string()),
        None => match lhs.strip_prefix("truth ") {
            Some(key) => Measure::Truth(key.trim().to_string()),
            None => {
                return Err(format!(
                    "line {n}: a measure is `@map[keys]`, `lines \"TEXT\"` or `truth KEY`, not `{lhs}`"
                ))
            }
        },
    };
    Ok(Expect::Compare { measure, op, want: want(rhs, n)?, line: n })
}

/// `TERM + TERM - ...`, each term `N`, `truth KEY` or `N * truth KEY`.
fn want(text: &str, n: usize) -> Result<Want, String> {
    let bad = || format!("line {n}: `{text}` is not a sum of numbers, `truth KEY` and `N * truth KEY`");
    let mut words = text.split_whitespace().peekable();
    let mut terms = Vec::new();
    let mut sign = 1;
    loop {
        let (factor, truth) = match words.next().ok_or_else(bad)? {
            "truth" => (1, Some(words.next().ok_or_else(bad)?.to_string())),
            number => {
                let number: i64 = number.parse().map_err(|_| bad())?;
                match words.next_if_eq(&"*") {
                    Some(_) if words.next() == Some("truth") => {
                        (number, Some(words.next().ok_or_else(bad)?.to_string()))
                    }
                    Some(_) => return Err(bad()),
                    None => (number, None),
                }
            }
        };
        terms.push(Term { factor: sign * factor, truth });
        sign = match words.next() {
            None => return Ok(Want(terms)),
            Some("+") => 1,
            Some("-") => -1,
            Some(_) => return Err(bad()),
        };
    }
}

/// The one quoted string `text` holds.
fn one_string(text: &str, n: usize) -> Result<String, String> {
    let mut all = words(text, n)?;
    match all.len() {
        1 => Ok(all.remove(0)),
        _ => Err(format!("line {n}: expected one quoted string, not `{text}`")),
    }
}

/// Words split at spaces; a double-quoted word may hold spaces, `\"`, `\\` and `\n`.
fn words(text: &str, n: usize) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = text.trim().chars().peekable();
    while let Some(&c) = chars.peek() {
        if c == ' ' {
            chars.next();
            continue;
        }
        let mut word = String::new();
        if c == '"' {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some('n') => word.push('\n'),
                        Some(c) => word.push(c),
                        None => return Err(format!("line {n}: a `\\` ends the line")),
                    },
                    Some(c) => word.push(c),
                    None => return Err(format!("line {n}: a quoted string is not closed")),
                }
            }
        } else {
            while let Some(&c) = chars.peek().filter(|c| **c != ' ') {
                word.push(c);
                chars.next();
            }
        }
        out.push(word);
    }
    Ok(out)
}
