// Package shape is the other package named shape (see p1), with its own Box.
package shape

type Box struct{ Side int8 }
