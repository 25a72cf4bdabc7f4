%% @doc The smallest tracer module: counts trace events by tag.
%%
%% A counter is the tracer state of a trace session (or of the legacy
%% `erlang:trace/3' API, or of the system seq tracer):
%%
%% ```
%% 1> {ok, C} = tracekit_count:new().
%% 2> S = trace:session_create(count, {tracekit_count, C}, []).
%% 3> trace:process(S, whereis(my_server), true, [send, 'receive']).
%% 4> tracekit_count:read(C).
%% #{send => 1042,'receive' => 1043}
%% '''
%%
%% Counting happens in C, in one row of counters per scheduler thread: no
%% message is sent, nothing is allocated, and the cost per event stays close
%% to the VM's own trace probe. {@link close/1} makes the tracer remove
%% itself from every tracee the next time the VM asks it.
-module(tracekit_count).

-export([new/0, read/1, reset/1, close/1]).
%% erl_tracer callbacks, called by the VM.
-export([enabled/3, trace/5]).

-on_load(init/0).

-nifs([new/0, read/1, reset/1, close/1, enabled/3, trace/5]).

-opaque counter() :: reference().
-export_type([counter/0]).

init() ->
    erlang:load_nif(tracekit_nif:path(?MODULE), 0).

%% @doc Creates a counter with every count at zero.
-spec new() -> {ok, counter()}.
new() ->
    erlang:nif_error(not_loaded).

%% @doc Events counted since creation or the last {@link reset/1}, by tag.
%% Tags with no events are absent. Raises `badarg' if `Counter' is not a
%% counter.
-spec read(counter()) -> #{atom() => pos_integer()}.
read(_Counter) ->
    erlang:nif_error(not_loaded).

%% @doc Sets every count to zero. Events counted concurrently are never
%% lost: they show in the next read.
-spec reset(counter()) -> ok.
reset(_Counter) ->
    erlang:nif_error(not_loaded).

%% @doc Stops counting. Traced processes lose this tracer the next time the
%% VM checks it (at the latest when they are scheduled in); events arriving
%% meanwhile are discarded. The counts can still be read.
-spec close(counter()) -> ok.
close(_Counter) ->
    erlang:nif_error(not_loaded).

%% @private erl_tracer callback.
-spec enabled(atom(), term(), pid() | port() | undefined) -> trace | discard | remove.
enabled(_Tag, _State, _Tracee) ->
    erlang:nif_error(not_loaded).

%% @private erl_tracer callback.
-spec trace(atom(), term(), term(), term(), map()) -> ok.
trace(_Tag, _State, _Tracee, _TraceTerm, _Opts) ->
    erlang:nif_error(not_loaded).
