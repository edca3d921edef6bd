#include "textflag.h"

// func getg() uintptr: the running goroutine's g (what gtrace keys its records by).
TEXT ·getg(SB),NOSPLIT,$0-8
	MOVQ (TLS), AX
	MOVQ AX, ret+0(FP)
	RET
