%% @private
%% @doc tracekit's own processes on this node: every process of a trace
%% (the trace's process, its agents, their helpers, the printer's) marks
%% itself here, and a trace of `all' or `existing' processes that starts
%% later leaves them untraced, so that two traces do not trace each
%% other's work (each line of one making an event of the other).
%%
%% A trace that is running already must leave out the processes that
%% tracekit starts later too (a trace of `all' processes traces every new
%% one): a process marked is taken out of every tracekit session of the
%% node at once (`trace:session_info(all)' names them, without a message).
%%
%% The marks are kept in an ETS table of each marking process, found
%% through `ets:all/0': asking other processes would send them signals and
%% get messages, which a trace of messages would see. A table goes with
%% its process, so a mark never outlives it.
-module(tracekit_own).

-export([mark/1, untrace/1, processes/0]).

%% A session's weak reference is opaque, and its name is the only way to
%% tell tracekit's sessions from the others (`{tracekit, Id}').
-dialyzer({no_opaque, [mark/1, untrace/1, untrace/2]}).

%% The name of the tables (not named tables: each process has one).
-define(OWN, tracekit_own).

%% @doc Marks the calling process and `More' as tracekit's own, and takes
%% them out of the sessions of the traces running on this node. (Nothing
%% here sends or receives a message: the calling process may be traced
%% until it is done.)
-spec mark([pid()]) -> ok.
mark(More) ->
    Pids = [self() | More],
    _ = [untrace(S, P) || {tracekit, _} = S <- trace:session_info(all), P <- Pids],
    true = ets:insert(table(), [{P} || P <- Pids]),
    ok.

%% @doc Takes `Pid' out of the sessions of the traces running on this
%% node, without marking it (a process tracekit starts, which marks
%% itself later, untraced before it makes its first call).
-spec untrace(pid()) -> ok.
untrace(Pid) ->
    _ = [untrace(S, Pid) || {tracekit, _} = S <- trace:session_info(all)],
    ok.

%% @doc The processes of this node marked as tracekit's own.
-spec processes() -> [pid()].
processes() ->
    lists:append([try ets:select(T, [{{'$1'}, [], ['$1']}])
                  catch error:badarg -> []              % deleted meanwhile
                  end || T <- ets:all(), ets:info(T, name) =:= ?OWN]).

table() ->
    case get('$tracekit_own') of
        undefined ->
            T = ets:new(?OWN, [public, {read_concurrency, true}]),
            _ = put('$tracekit_own', T),
            T;
        T ->
            T
    end.

untrace(S, P) ->
    try trace:process(S, P, false, [all])
    catch error:badarg -> 0                     % destroyed, or P exited
    end.
