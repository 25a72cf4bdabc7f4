%% @doc Test helper: a tracer module that stays installed and refuses
%% every event (enabled/3 answers `trace' to trace_status and `discard'
%% otherwise). `seq_trace:set_system_tracer({tk_seq_refuse, []})' makes a
%% system seq tracer that declines every seq_trace event.
-module(tk_seq_refuse).

-export([enabled/3, trace/5]).

-on_load(init/0).

-nifs([enabled/3, trace/5]).

init() ->
    erlang:load_nif(tk_test_nif:path(?MODULE), 0).

enabled(_Tag, _State, _Tracee) ->
    erlang:nif_error(not_loaded).

trace(_Tag, _State, _Tracee, _TraceTerm, _Opts) ->
    erlang:nif_error(not_loaded).
