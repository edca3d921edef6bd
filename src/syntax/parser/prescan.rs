//! The lexical pre-scan: unterminated strings and over-deep bracket nesting are found
//! before pest sees the text, reading strings and comments exactly as the grammar does.

use super::MAX_NESTING;
use crate::diag::Diagnostic;
use crate::syntax::ast::Span;

/// What the pre-scan learnt: the brackets still open at the end of the file.
pub(super) struct Scan {
    pub(super) unclosed: Vec<(char, usize)>,
}

/// Finds unterminated strings and over-deep bracket nesting before pest sees the text.
/// It reads strings and comments exactly as the grammar does.
pub(super) fn prescan(text: &str, file: u32) -> Result<Scan, Diagnostic> {
    let bytes = text.as_bytes();
    let mut stack: Vec<(char, usize)> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'#' => i = line_end(text, i),
            b'/' if bytes.get(i + 1) == Some(&b'/') => i = line_end(text, i),
            b'"' => {
                let start = i;
                i += 1;
                loop {
                    match bytes.get(i) {
                        None | Some(b'\n') | Some(b'\r') => {
                            let end = line_end(text, start);
                            return Err(Diagnostic::error(Span::new(file, start, end), "unterminated string")
                                .label("this string has no closing `\"`")
                                .hint("a string ends on the line it starts; write a line break as `\\n`"));
                        }
                        Some(b'\\') if matches!(bytes.get(i + 1), Some(b'\n') | Some(b'\r') | None) => i += 1,
                        Some(b'\\') => i += 2,
                        Some(b'"') => {
                            i += 1;
                            break;
                        }
                        Some(_) => i += 1,
                    }
                }
            }
            open @ (b'(' | b'[' | b'{') => {
                stack.push((open as char, i));
                if stack.len() > MAX_NESTING {
                    return Err(Diagnostic::error(Span::new(file, i, i + 1), "brackets nested too deeply")
                        .label(format!("more than {MAX_NESTING} levels of brackets"))
                        .hint("split the expression with `:=` variables"));
                }
                i += 1;
            }
            close @ (b')' | b']' | b'}') => {
                let open = match close {
                    b')' => '(',
                    b']' => '[',
                    _ => '{',
                };
                if stack.last().map(|(c, _)| *c) == Some(open) {
                    stack.pop();
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    Ok(Scan { unclosed: stack })
}

/// The byte offset of the end of the line holding `i` (before the newline).
fn line_end(text: &str, i: usize) -> usize {
    text.get(i..).and_then(|rest| rest.find(['\n', '\r'])).map(|n| i + n).unwrap_or(text.len())
}
