%% Functions for the trace session property to put patterns on. Only the
%% property calls them, so their call counts are known: f/0 runs itself,
%% f/1 runs itself and h/1, g/1 runs itself.
-module(tk_session_funs).

-export([f/0, f/1, g/1, k/0]).

f() -> ok.

f(X) -> h(X).

g(X) -> {X}.

k() -> fun(X) -> h(X) end.

h(X) -> X.
