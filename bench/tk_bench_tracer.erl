%% @doc The reference tracers of the benchmarks. `{tk_bench_tracer,
%% trace}' accepts every event and does nothing with it; `{tk_bench_tracer,
%% discard}' refuses every event in enabled/3: their cost is the VM's own.
%% `{tk_bench_tracer, floor_new()}' does the least a tracer that records
%% events in order must do (see bench_tracer_nif.c).
-module(tk_bench_tracer).
-export([enabled/3, trace/5, floor_new/0]).
-on_load(init/0).
-nifs([enabled/3, trace/5, floor_new/0]).

init() ->
    erlang:load_nif(tracekit_nif:path(?MODULE), 0).

enabled(_Tag, _State, _Tracee) -> erlang:nif_error(not_loaded).
trace(_Tag, _State, _Tracee, _Term, _Opts) -> erlang:nif_error(not_loaded).
floor_new() -> erlang:nif_error(not_loaded).
