// Package shape is one of two packages named shape (see p2): a runtime type name says
// `shape.Box` for both, so gtrace must find which by the type itself.
package shape

type Box struct{ W, H int }
