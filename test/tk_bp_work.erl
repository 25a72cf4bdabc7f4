%% @doc Test helper: the functions whose calls tracekit_bp_SUITE counts,
%% both on the VM (call_count breakpoints) and in the breakpoint model.
%% Only the suite's worker processes call them.
-module(tk_bp_work).

-export([run/1, seq/3, seq_r/3, seq_r/4, succ/1, twice/1, lam/1]).

%% One workload.
run({seq, N}) -> seq(1, N, fun ?MODULE:succ/1);
run({seq_r, N}) -> seq_r(1, N, fun ?MODULE:succ/1);
run({twice, N}) -> [twice(X) || X <- lists:seq(1, N)];
run({lam, N}) -> lam(N).

%% Stack recursive sequence.
seq(Stop, Stop, Succ) when is_function(Succ) -> [Stop];
seq(Start, Stop, Succ) when is_function(Succ) -> [Start | seq(Succ(Start), Stop, Succ)].

%% Tail recursive sequence, reversed.
seq_r(Start, Stop, Succ) when is_function(Succ) -> seq_r(Start, Stop, Succ, []).

seq_r(Stop, Stop, _, R) -> [Stop | R];
seq_r(Start, Stop, Succ, R) -> seq_r(Succ(Start), Stop, Succ, [Start | R]).

succ(X) -> X + 1.

%% Calls a function that is not exported.
twice(X) -> hidden(hidden(X)).

hidden(X) -> X * 2.

%% Calls a fun defined here (its function is a local one of this module).
lam(N) -> lists:map(fun(X) -> X + N end, lists:seq(1, N)).
