%% @private
%% @doc The part of a trace that runs on the node traced: the trace flags
%% of a request set in a session of this node, leaving out the processes
%% that printing a line goes through. Used by {@link tracekit_runner} for
%% a trace of its own node and by {@link tracekit_agent} on each node of a
%% cluster trace.
-module(tracekit_setup).

-export([session/4, io_pid/1, mark_own/1]).

%% The name of the tables that mark tracekit's own processes (not named
%% tables: each process has one).
-define(OWN, tracekit_own).

%% @doc Sets the flags of `Req' in session `S' on this node. `Exclude':
%% more processes to leave untraced by `all' and `existing' (the process
%% that receives the events, when it is on this node).
-spec session(trace:session(), tracekit_runner:request(), map(), [pid()]) ->
          ok | {error, {bad_process, pid(), string()}}.
session(S, #{kind := Kind, procs := Procs} = Req, Opts, Exclude) ->
    Flags = case Kind of
                calls -> [call, timestamp];
                messages -> [send, 'receive', timestamp];
                procs -> [procs, timestamp]
            end,
    try
        Scope = maps:get(scope, Opts),
        %% A module not loaded yet (on another node of a cluster trace)
        %% would have none of its functions traced.
        _ = [code:ensure_loaded(M) || Kind =:= calls,
                                      {_, MFAs} <- maps:get(calls, Req, []),
                                      {M, _, _} <- MFAs, is_atom(M), M =/= '_'],
        _ = [trace:function(S, MFA, MS, [Scope])
             || Kind =:= calls,
                {#{match_spec := MS}, MFAs} <- maps:get(calls, Req, []),
                MFA <- MFAs],
        case Procs of
            L when is_list(L) ->
                lists:foreach(fun(P) -> trace_proc(S, P, Flags) end, L);
            new ->
                _ = trace:process(S, new, true, Flags),
                ok;
            All ->
                %% Found before tracing starts: looking into other
                %% processes gets messages.
                Local = [P || P <- Exclude ++ maps:get(exclude, Req, []), node(P) =:= node()],
                Untraced = lists:usort(Local ++ printing_path(Opts) ++ others()),
                _ = trace:process(S, All, true, Flags),
                lists:foreach(fun(P) -> untrace(S, P) end, Untraced)
        end
    catch
        throw:{dead, P} ->
            {error, {bad_process, P, "the process is not alive"}}
    end.

%% @doc Marks the calling process as one of tracekit's own (a trace's
%% process, an agent), with `More' (the printer's processes): the traces
%% of all or existing processes that start later leave them untraced, so
%% that two traces do not trace each other's printing, each line of one
%% making an event of the other. The marks are in a table of the calling
%% process (found with ets:all/0: looking into other processes would
%% send them signals and get messages, which a trace would see).
-spec mark_own([pid()]) -> ok.
mark_own(More) ->
    Tab = case get('$tracekit_own') of
              undefined ->
                  T = ets:new(?OWN, [public, {read_concurrency, true}]),
                  _ = put('$tracekit_own', T),
                  T;
              T ->
                  T
          end,
    true = ets:insert(Tab, [{P} || P <- [self() | More]]),
    ok.

%% The processes of this node that tracekit marked as its own.
others() ->
    lists:append([try ets:select(T, [{{'$1'}, [], ['$1']}])
                  catch error:badarg -> []              % deleted meanwhile
                  end || T <- ets:all(), ets:info(T, name) =:= ?OWN]).

untrace(S, P) ->
    try trace:process(S, P, false, [all])
    catch error:badarg -> 0                     % exited meanwhile
    end.

trace_proc(S, P, Flags) ->
    try trace:process(S, P, true, Flags) of
        _ -> ok
    catch
        error:badarg -> throw({dead, P})
    end.

%% The processes that printing a line goes through, which are never
%% traced (each line would make events, shown in more lines): this
%% process; the io device and the group leaders it hands the output on
%% to; the terminal's processes: user_drv with its writer and reader,
%% user, standard_error and its writer (OTP 29); and the VM's dirty
%% process signal handlers, which get a message for each signal to a
%% process that runs a dirty NIF, as the terminal's writer does while it
%% writes (OTP 27). Those of another node are not traced here anyway.
printing_path(Opts) ->
    Io = io_pid(maps:get(io, Opts, standard_io)),
    Terminal = [whereis(N) || N <- [user_drv, user_drv_writer, user_drv_reader, user,
                                    standard_error, standard_error_writer]],
    lists:usort([self() | leaders([Io], [])] ++ [P || P <- Terminal, is_pid(P)]
                ++ signal_handlers()).

%% The VM starts its system processes first, before any other.
signal_handlers() ->
    [P || P <- lists:sublist(erlang:processes(), 16),
          erlang:process_info(P, initial_call)
              =:= {initial_call, {erts_dirty_process_signal_handler, start, 0}}].

%% Ps and their group leaders, and theirs, and so on (the local ones).
leaders([], Seen) ->
    Seen;
leaders([P | Ps], Seen) when is_pid(P), node(P) =:= node() ->
    case lists:member(P, Seen) of
        true ->
            leaders(Ps, Seen);
        false ->
            case erlang:process_info(P, group_leader) of
                {group_leader, GL} -> leaders([GL | Ps], [P | Seen]);
                undefined -> leaders(Ps, Seen)
            end
    end;
leaders([_ | Ps], Seen) ->
    leaders(Ps, Seen).


%% @doc The process of an io device: `standard_io' is the group leader.
-spec io_pid(io:device()) -> pid() | undefined.
io_pid(standard_io) -> group_leader();
io_pid(Name) when is_atom(Name) -> whereis(Name);
io_pid(Pid) when is_pid(Pid) -> Pid;
io_pid(_) -> undefined.
