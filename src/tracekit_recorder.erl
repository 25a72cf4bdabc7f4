%% @doc A flight recorder: traces into an `overwrite' ring in a session of
%% its own and, when stopped, hands back the last N events. Used by
%% {@link tracekit_cth} for each test case.
%%
%% A process of its own owns the session and the ring, so the recording
%% survives the death of the process that started it (a test case killed
%% by its timetrap) until {@link stop/1}.
%%
%% With `nodes', it records on other nodes too: a recorder of the same
%% kind on each (started through erpc, watching this one: it cleans up by
%% itself when this recorder or the connection to it is gone), and with
%% `nodes => all' also on each node that connects while it records (from
%% when it notices the node). The recorders of the other nodes send what
%% they recorded every 100 ms, so that the events of a node that goes
%% away while the case runs are kept (up to its last 100 ms); this one
%% keeps the last N of each node. When stopped, it merges every node's
%% events by their timestamps, each node's in its own order.
-module(tracekit_recorder).

-export([start/1, stop/1, event_node/1]).

-export_type([recorder/0, spec/0, result/0]).

-opaque recorder() :: pid().
%% `calls': resolved call specs, traced in every process; `processes':
%% whose messages (`messages') and process events (`procs') to trace;
%% `seq_trace': record seq_trace events (this sets the node's system seq
%% tracer while recording, and restores the previous one after);
%% `events': how many of the last events to keep; `ring_size': bytes per
%% producer thread; `marks': functions whose calls, returns and exceptions
%% are recorded in the `mark_process', with its process events (to find
%% where a test case body begins and ends, also when it is killed);
%% `nodes': other nodes to record on too (`all': every connected node, and
%% those that connect later); `owner': a process whose end ends the
%% recording (the recorder of the calling node, for the others).
-type spec() :: #{calls := [{tracekit_spec:call(), [tracekit_spec:mfa_pattern()]}],
                  processes := [pid()],
                  messages := boolean(),
                  procs := boolean(),
                  seq_trace := boolean(),
                  events := pos_integer(),
                  ring_size := pos_integer(),
                  marks => [mfa()],
                  mark_process => pid(),
                  nodes => all | [node()],
                  owner => pid()}.
%% `events': the events kept, oldest first; `lost': events that were
%% recorded but gave way to newer ones, or were refused; `nodes': the
%% nodes recorded on, and why some could not be.
-type result() :: #{events := [tuple()], lost := non_neg_integer(),
                    nodes => [node()], failed => [{node(), term()}]}.

-define(CALL_MS, 10000).
%% How often a recorder of another node sends what it recorded.
-define(FORWARD_MS, 100).

%% @doc Starts recording; returns when tracing is on.
-spec start(spec()) -> {ok, recorder()} | {error, term()}.
start(Spec) ->
    Self = self(),
    Ref = make_ref(),
    {Pid, Mon} = spawn_monitor(fun() -> init(Self, Ref, Spec) end),
    receive
        {Ref, ok} -> demonitor(Mon, [flush]), {ok, Pid};
        {Ref, {error, _} = E} -> demonitor(Mon, [flush]), E;
        {'DOWN', Mon, process, Pid, Why} -> {error, {recorder_failed, Why}}
    end.

%% @doc Stops recording, cleans up (session destroyed, ring closed, the
%% seq tracer restored, on every node) and returns what was recorded.
-spec stop(recorder()) -> {ok, result()} | {error, not_running}.
stop(Pid) ->
    Mon = monitor(process, Pid),
    Pid ! {stop, self(), Mon},
    receive
        {Mon, Result} -> demonitor(Mon, [flush]), {ok, Result};
        {'DOWN', Mon, process, Pid, _} -> {error, not_running}
    end.

%% @doc The node where an event happened: its process's, or for a
%% seq_trace event the sender's (send, print) or the receiver's.
-spec event_node(tuple()) -> node().
event_node({seq_trace, _, Info}) -> info_node(Info);
event_node({seq_trace, _, Info, _}) -> info_node(Info);
event_node(E) when tuple_size(E) >= 2 ->
    case element(2, E) of
        P when is_pid(P); is_port(P) -> node(P);
        _ -> node()
    end.

info_node({'receive', _, _, To, _}) when is_pid(To) -> node(To);
info_node({_, _, From, _, _}) when is_pid(From) -> node(From);
info_node(_) -> node().

init(Parent, Ref, #{ring_size := Size} = Spec) ->
    OwnerMon = case Spec of
                   #{owner := Owner} -> monitor(process, Owner);
                   _ -> undefined
               end,
    {ok, Ring} = tracekit_ring:new(#{size => Size, policy => overwrite}),
    Session = trace:session_create(tracekit_cth, {tracekit_ring, Ring}, []),
    try
        setup(Session, Ring, Spec)
    of
        Prev ->
            Remote = start_nodes(nodes_of(Spec), Spec, #{}),
            Parent ! {Ref, ok},
            wait(#{session => Session, ring => Ring, prev => Prev, spec => Spec,
                   owner_mon => OwnerMon, remote => Remote, got => #{}})
    catch
        Class:Why ->
            _ = trace:session_destroy(Session),
            ok = tracekit_ring:close(Ring),
            Parent ! {Ref, {error, {Class, Why}}}
    end.

setup(S, Ring, #{calls := Calls, processes := Procs, messages := M,
                 procs := P, seq_trace := Seq} = Spec) ->
    _ = [code:ensure_loaded(Mod) || {_, MFAs} <- Calls, {Mod, _, _} <- MFAs, is_atom(Mod)],
    _ = [trace:function(S, MFA, MS, [local])
         || {#{match_spec := MS}, MFAs} <- Calls, MFA <- MFAs],
    Marks = maps:get(marks, Spec, []),
    _ = [trace:function(S, MFA, [{'_', [], [{exception_trace}]}], [local])
         || MFA <- Marks],
    _ = [try trace:process(S, MP, true, [call, procs, timestamp])
         catch error:badarg -> 0
         end || Marks =/= [], MP <- [maps:get(mark_process, Spec)]],
    _ = [{trace:process(S, all, true, [call, timestamp]),
          trace:process(S, self(), false, [all])} || Calls =/= []],
    Flags = [send || M] ++ ['receive' || M] ++ [procs || P],
    _ = [try trace:process(S, Pid, true, [timestamp | Flags])
         catch error:badarg -> 0      % exited already: nothing to record
         end || Flags =/= [], Pid <- Procs, node(Pid) =:= node()],
    case Seq of
        true -> {seq, seq_trace:set_system_tracer({tracekit_ring, Ring})};
        false -> none
    end.

%%% Other nodes ---------------------------------------------------------------

nodes_of(#{nodes := all}) ->
    ok = net_kernel:monitor_nodes(true),
    nodes();
nodes_of(#{nodes := Nodes}) ->
    [N || N <- Nodes, N =/= node()];
nodes_of(_) ->
    [].

%% A recorder on each node: Node => {ok, Pid} | {error, Why}.
start_nodes(Nodes, Spec, Remote) ->
    lists:foldl(fun(N, Acc) -> Acc#{N => start_node(N, Spec)} end, Remote,
                [N || N <- Nodes, not is_map_key(N, Remote)]).

start_node(N, Spec) ->
    There = (maps:without([nodes, marks, mark_process], Spec))#{owner => self()},
    try erpc:call(N, ?MODULE, start, [There], ?CALL_MS) of
        {ok, Pid} -> {ok, Pid};
        {error, Why} -> {error, Why}
    catch
        error:{exception, undef, _} -> {error, "tracekit is not loaded there"};
        Class:Why -> {error, {Class, Why}}
    end.

%% A node that just connected may still be starting (its code path not
%% set yet): a few tries, 200 ms apart.
node_up(N, Try, Spec, Remote) ->
    case start_nodes([N], Spec, Remote) of
        #{N := {error, _}} = R when Try < 5 ->
            erlang:send_after(200, self(), {retry, N, Try + 1}),
            R;
        R ->
            R
    end.

%%% Recording -----------------------------------------------------------------

wait(#{owner_mon := OwnerMon, remote := Remote, spec := Spec, got := Got} = St) ->
    receive
        {stop, From, Tag} ->
            From ! {Tag, finish(St)};
        {?MODULE, Node, Events, Lost} ->
            wait(St#{got := keep(Node, Events, Lost, maps:get(events, Spec), Got)});
        {nodeup, N} ->
            wait(St#{remote := node_up(N, 1, Spec, Remote)});
        {retry, N, Try} ->
            wait(St#{remote := node_up(N, Try, Spec, maps:remove(N, Remote))});
        {nodedown, _} ->
            wait(St);
        {'DOWN', OwnerMon, process, _, _} ->
            %% The recorder that started this one (on another node) is
            %% gone, or the connection to it: nobody will ask.
            _ = finish(St),
            ok
    after forward_ms(St) ->
            wait(forward(St))
    end.

forward_ms(#{spec := #{owner := _}}) -> ?FORWARD_MS;
forward_ms(_) -> infinity.

%% A recorder of another node: what it recorded since, to its owner.
forward(#{spec := #{owner := Owner}, ring := Ring} = St) ->
    _ = case tracekit_ring:drain(Ring) of
            [] -> ok;
            Events -> Owner ! {?MODULE, node(), Events, 0}
        end,
    St.

%% The last N events of each other node, and what was lost there.
keep(Node, Events, Lost, N, Got) ->
    {Q0, Len0, Lost0} = maps:get(Node, Got, {queue:new(), 0, 0}),
    Q1 = queue:join(Q0, queue:from_list(Events)),
    Len1 = Len0 + length(Events),
    Drop = max(0, Len1 - N),
    {_, Q2} = queue:split(Drop, Q1),
    Got#{Node => {Q2, Len1 - Drop, Lost0 + Lost + Drop}}.

finish(#{session := Session, ring := Ring, prev := Prev, spec := #{events := N} = Spec,
         remote := Remote, got := Got0}) ->
    _ = trace:session_destroy(Session),
    _ = case Prev of
            {seq, Old} -> seq_trace:set_system_tracer(Old);
            none -> ok
        end,
    ok = tracekit_ring:close(Ring),
    Events = tracekit_ring:drain(Ring),
    #{overwritten := Over, dropped := Dropped} = tracekit_ring:stats(Ring),
    Here = #{events => Events, lost => Over + Dropped},
    case Spec of
        #{owner := _} ->
            %% A recorder of another node: what its owner does not have yet.
            Here;
        _ ->
            finish(N, Here, Remote, Got0)
    end.

finish(N, Here, Remote, Got0) ->
    Finals = [{Node, stop_node(Node, Pid)} || Node := {ok, Pid} <- Remote],
    Got = lists:foldl(fun({Node, #{events := Es, lost := L}}, Acc) -> keep(Node, Es, L, N, Acc);
                         (_, Acc) -> Acc
                      end, Got0, Finals),
    Results = [{node(), Here}
               | [{Node, #{events => queue:to_list(Q), lost => L}} || Node := {Q, _, L} <- Got]]
        ++ [{Node, E} || {Node, {error, _} = E} <- Finals, not is_map_key(Node, Got)],
    All = lists:foldl(fun({_, #{events := Es}}, Acc) ->
                              lists:merge(fun(A, B) -> time(A) =< time(B) end, Acc, Es)
                      end, [], [R || {_, #{events := _}} = R <- Results]),
    Len = length(All),
    Kept = lists:nthtail(max(0, Len - N), All),
    Lost = lists:sum([L || {_, #{lost := L}} <- Results]) + (Len - length(Kept)),
    Failed = [{Node, Why} || Node := {error, Why} <- Remote]
        ++ [{Node, Why} || {Node, {error, Why}} <- Results],
    case map_size(Remote) of
        0 -> #{events => Kept, lost => Lost};
        _ -> #{events => Kept, lost => Lost, failed => lists:sort(Failed),
               nodes => lists:sort([Node || {Node, #{events := _}} <- Results])}
    end.

stop_node(Node, Pid) ->
    try erpc:call(Node, ?MODULE, stop, [Pid], ?CALL_MS) of
        {ok, Result} -> Result;
        {error, Why} -> {error, Why}
    catch
        Class:Why -> {error, {Class, Why}}
    end.

%% An event's time in microseconds (its timestamp; 0 for one without, which
%% then keeps its place).
time(E) ->
    case element(tuple_size(E), E) of
        {Mega, Sec, Micro} when is_integer(Mega), is_integer(Sec), is_integer(Micro) ->
            (Mega * 1000000 + Sec) * 1000000 + Micro;
        _ ->
            0
    end.
