%% @doc tracekit's NIF libraries: where they live, and the NIFs that are
%% not tracer callbacks.
%%
%% Every tracer module carries its own NIF library (the VM calls the
%% module's `enabled/3' and `trace/5', so those must be NIFs of that very
%% module). Each module loads it from its `-on_load' function with
%% `erlang:load_nif(tracekit_nif:path(?MODULE), 0)'. This module's own
%% library holds the other NIFs, such as the causal ordering of seq_trace
%% events that {@link tracekit_seq:order/1} uses.
-module(tracekit_nif).

-export([path/1, priv_dir/0, seq_order/1]).

-on_load(init/0).
-nifs([seq_order/1]).

init() ->
    erlang:load_nif(path(?MODULE), 0).

%% @doc The path (without extension) of the NIF library of `Module': in
%% the application's `priv' directory, or in the directory the environment
%% variable `TRACEKIT_NIF_DIR' names (the sanitizer build of the tests
%% uses it).
-spec path(module()) -> file:filename().
path(Module) ->
    Dir = case os:getenv("TRACEKIT_NIF_DIR") of
              false -> priv_dir();
              "" -> priv_dir();
              D -> D
          end,
    filename:join(Dir, atom_to_list(Module)).

%% @doc The application's `priv' directory, also when the beams were put in
%% the code path by hand rather than as an application.
-spec priv_dir() -> file:filename().
priv_dir() ->
    case code:priv_dir(tracekit) of
        {error, bad_name} ->
            Ebin = filename:dirname(code:which(?MODULE)),
            filename:join(filename:dirname(Ebin), "priv");
        Dir ->
            Dir
    end.

%% @doc The causal order of seq_trace events given as interned numbers:
%% `{Kind, Label, LastCnt, Serial, From, To, Msg, SpawnReply}' (`To' is -1
%% for a print). Returns the input positions (0-based) in causal order,
%% each with the position of the event matched with it (a send's receive,
%% a receive's send) or -1. The rules are in c_src/lib/tk_seqorder.h;
%% {@link tracekit_seq:order/1} is the interface for people.
-spec seq_order([{send | 'receive' | print, non_neg_integer(), integer(),
                  integer(), non_neg_integer(), integer(), non_neg_integer(),
                  boolean()}]) -> [{non_neg_integer(), integer()}].
seq_order(_Events) ->
    erlang:nif_error(not_loaded).
