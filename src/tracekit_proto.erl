%% @private
%% @doc The protocol between a trace and its agents: what a trace asks an
%% agent for (one agent per node traced, the calling node's included) and
%% what the agent answers, with its types and its version. The trace's
%% side ({@link tracekit_nodes}) and the agent's side ({@link
%% tracekit_agent}) build and read every message through this module.
%%
%% Start. The trace asks a node for its `hello' (through erpc) before it
%% asks it to start: the answer names the protocol that node speaks, and a
%% node that speaks another one is refused with both versions said, so
%% that no batch is ever sent that the other side does not read. Then the
%% trace starts the agent with a {@link plan()}: what to trace and where
%% to keep it.
%%
%% Running. The trace pulls: `more' asks for at most N events, and the
%% agent answers with the events drained now, the node's horizon (every
%% event drained later comes after it) and its counters, or, when it
%% writes a file, with the file's counters, or, when it measures latency,
%% with its histograms (cumulative: the trace keeps each node's latest,
%% and asks again {@link latency_ms()} later). At most one question is
%% open per agent, so memory stays bounded on both sides.
%%
%% End. `close' stops tracing there; the agent answers `closed' with its
%% final counters once everything it recorded is drained or written, and
%% still answers `more' (the last events) and `read' (pieces of its trace
%% file); `done' lets it go (it deletes what it kept). An agent whose
%% trace is gone (its process, its node, the connection) cleans up by
%% itself.
-module(tracekit_proto).

-export([version/0, hello/1, batch/0, idle_ms/0, latency_ms/0, event_stamp/1]).
-export([ask_more/2, ask_close/1, ask_read/3, let_go/1, await/4, answer/3, request/1,
         reply/1]).

-export_type([what/0, plan/0, sink/0, who/0, call/0, request/0, answer/0, horizon/0,
              counters/0, version/0]).

%% Raised whenever a message changes shape or meaning. A test compiles
%% this module with another version to play a node of another release.
-ifndef(TRACEKIT_PROTOCOL).
-define(TRACEKIT_PROTOCOL, 3).
-endif.

%% Events asked for at a time, per agent.
-define(BATCH, 1000).
%% How long a node that had nothing new waits before it is asked again.
-define(IDLE_MS, 10).
%% How often a node that measures latency is asked for its histograms.
-define(LATENCY_MS, 500).

-type version() :: pos_integer().

%% What a trace traces: `procs' whose events, with which flags (`all',
%% `new' and `existing' leave tracekit's own processes out; a list may
%% hold pids of any node traced and registered names, the trace picks
%% each node's); `calls' the functions, each with its match spec and
%% `local' or `global'; `seq_trace' the node's system seq tracer is set
%% to the sink while tracing (and restored however the agent ends).
-type what() :: #{procs := [{who() | [pid() | atom()], [atom()]}],
                  calls := [call()],
                  seq_trace := boolean()}.
%% What an agent traces on its node (its own processes only), and where
%% it keeps the events; `exclude': more processes of that node never
%% traced (the processes that print the lines, on the calling node).
-type plan() :: #{procs := [{who(), [atom()]}],
                  calls := [call()],
                  seq_trace := boolean(),
                  sink := sink(),
                  exclude := [pid()]}.
-type who() :: all | new | existing | [pid()].
-type call() :: {{module() | '_', atom() | '_', arity() | '_'}, [tuple()] | true,
                 local | global}.
%% A ring (`drop' keeps the first events, `overwrite' the last ones), or a
%% trace file: `{dir, Dir}' a file named for the node in Dir, `temp' a
%% file in a private directory of the node's temporary directory (fetched
%% with `read', deleted at the end), or a latency tracer (its options, as
%% tracekit_latency:new/1 takes them: the calls of the plan are measured,
%% and its processes' exits end their open calls).
-type sink() :: #{kind := ring, size := pos_integer(), payload := term(),
                  policy := drop | overwrite}
              | #{kind := file, where := temp | {path, file:name_all()},
                  size := pos_integer(), payload := term(),
                  max_events := pos_integer() | infinity, rate := term()}
              | #{kind := latency, options := tracekit_latency:options()}.

-type request() :: {more, reference(), pos_integer()}
                 | {close, reference()}
                 | {read, reference(), non_neg_integer(), pos_integer()}
                 | {done, reference()}.
%% `{events, Events, Horizon, Counters, Names}': Names are the registered
%% names of the node's processes the events mention. `{latency,
%% Snapshot, Horizon}': the node's histograms so far (Horizon `closed'
%% once they are final).
-type answer() :: {events, [tuple()], horizon(), counters(), #{pid() => atom()}}
                | {file, counters()}
                | {latency, tracekit_latency:snapshot(), horizon()}
                | {closed, counters()}
                | {data, binary()} | eof | {error, term()} | done.
%% A time of the node's clock (system time, microseconds) every event
%% drained later comes after; `last': after the last of these events
%% (when it has a timestamp, event_stamp/1; else no later than before);
%% `closed': there will be no more.
-type horizon() :: integer() | last | closed.
%% The counters of the sink (tracekit_ring:stats/1 or tracekit_file:stats/1).
-type counters() :: #{atom() => term()}.

%% @doc The protocol this node speaks.
-spec version() -> version().
version() ->
    ?TRACEKIT_PROTOCOL.

%% @doc A node's answer to a trace that is about to start there (called
%% through erpc): the protocol it speaks, whether tracekit's tracer
%% modules load there (their NIF libraries with them), and its release.
-spec hello(ring | file | latency) -> #{protocol := version(),
                                        loads := ok | {error, string()},
                                        otp := string()}.
hello(Kind) ->
    Mods = case Kind of
               latency -> [tracekit_latency];
               file -> [tracekit_ring, tracekit_file];
               _ -> [tracekit_ring]
           end,
    Loads = case [M || M <- Mods, not loaded(M)] of
                [] -> ok;
                [M | _] -> {error, lists:flatten(io_lib:format("~w cannot be loaded there", [M]))}
            end,
    #{protocol => version(), loads => Loads, otp => erlang:system_info(otp_release)}.

loaded(M) ->
    case code:ensure_loaded(M) of
        {module, M} -> erlang:function_exported(M, enabled, 3);
        _ -> false
    end.

%% @doc Events asked for at a time.
-spec batch() -> pos_integer().
batch() -> ?BATCH.

%% @doc The time of an event's `{Mega, Sec, Micro}' timestamp, its node's
%% system time in microseconds, or `none' when it has none (a monotonic
%% timestamp is of its node's VM alone).
-spec event_stamp(tuple()) -> integer() | none.
event_stamp(E) ->
    case element(tuple_size(E), E) of
        {Mega, Sec, Micro} when is_integer(Mega), is_integer(Sec), is_integer(Micro) ->
            (Mega * 1000000 + Sec) * 1000000 + Micro;
        _ ->
            none
    end.

%% @doc Milliseconds a node that had nothing new waits to be asked again.
-spec idle_ms() -> pos_integer().
idle_ms() -> ?IDLE_MS.

%% @doc Milliseconds between two questions to a node that measures
%% latency.
-spec latency_ms() -> pos_integer().
latency_ms() -> ?LATENCY_MS.

%%% The trace's side ------------------------------------------------------------

%% @doc Asks an agent for at most `Max' events; the answer carries the
%% returned reference.
-spec ask_more(pid(), pos_integer()) -> reference().
ask_more(Agent, Max) ->
    send(Agent, fun(Ref) -> {more, Ref, Max} end).

%% @doc Asks an agent to stop tracing.
-spec ask_close(pid()) -> reference().
ask_close(Agent) ->
    send(Agent, fun(Ref) -> {close, Ref} end).

%% @doc Asks an agent for `Size' bytes of its trace file from `Offset'.
-spec ask_read(pid(), non_neg_integer(), pos_integer()) -> reference().
ask_read(Agent, Offset, Size) ->
    send(Agent, fun(Ref) -> {read, Ref, Offset, Size} end).

%% @doc Lets an agent go: it deletes what it kept, answers `done' and
%% ends.
-spec let_go(pid()) -> reference().
let_go(Agent) ->
    send(Agent, fun(Ref) -> {done, Ref} end).

send(Agent, Make) ->
    Ref = make_ref(),
    Agent ! {tracekit_trace, Make(Ref)},
    Ref.

%% @doc Waits for the answer `Ref' of `Agent' (monitored by `Mon').
-spec await(pid(), reference(), reference(), timeout()) ->
          {ok, answer()} | {down, term()} | timeout.
await(Agent, Ref, Mon, Timeout) ->
    receive
        {tracekit_agent, Agent, Ref, Answer} -> {ok, Answer};
        {'DOWN', Mon, process, Agent, Why} -> {down, Why}
    after Timeout ->
            timeout
    end.

%% @doc An agent's answer, `{Agent, Ref, Answer}', or `no' for any other
%% message.
-spec reply(term()) -> {pid(), reference(), answer()} | no.
reply({tracekit_agent, Agent, Ref, Answer}) when is_pid(Agent), is_reference(Ref) ->
    {Agent, Ref, Answer};
reply(_) ->
    no.

%%% The agent's side ------------------------------------------------------------

%% @doc A trace's request, or `no' for any other message.
-spec request(term()) -> request() | no.
request({tracekit_trace, {more, Ref, Max} = R}) when is_reference(Ref), is_integer(Max), Max > 0 -> R;
request({tracekit_trace, {close, Ref} = R}) when is_reference(Ref) -> R;
request({tracekit_trace, {read, Ref, Off, Size} = R})
  when is_reference(Ref), is_integer(Off), Off >= 0, is_integer(Size), Size > 0 -> R;
request({tracekit_trace, {done, Ref} = R}) when is_reference(Ref) -> R;
request(_) -> no.

%% @doc Answers a request of the trace `Trace'.
-spec answer(pid(), reference(), answer()) -> ok.
answer(Trace, Ref, Answer) ->
    Trace ! {tracekit_agent, self(), Ref, Answer},
    ok.
