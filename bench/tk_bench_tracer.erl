%% @doc The reference tracers of the benchmarks. `{tk_bench_tracer,
%% trace}' accepts every event and does nothing with it; `{tk_bench_tracer,
%% discard}' refuses every event in enabled/3: their cost is the VM's own.
%% `{tk_bench_tracer, floor_new()}' does the least a tracer that records
%% events in order must do (see bench_tracer_nif.c).
-module(tk_bench_tracer).
-export([enabled/3, trace/5, floor_new/0]).
-on_load(init/0).
-nifs([enabled/3, trace/5, floor_new/0]).

%% The library is built outside priv/, into the build tree the Makefile
%% exports as TRACEKIT_BUILD (`make bench' runs this).
init() ->
    erlang:load_nif(filename:join([os:getenv("TRACEKIT_BUILD", "build"), "bench_nif",
                                   atom_to_list(?MODULE)]), 0).

enabled(_Tag, _State, _Tracee) -> erlang:nif_error(not_loaded).
trace(_Tag, _State, _Tracee, _Term, _Opts) -> erlang:nif_error(not_loaded).
floor_new() -> erlang:nif_error(not_loaded).
