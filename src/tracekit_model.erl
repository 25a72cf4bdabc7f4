%% @doc The C core's models of the VM's tracing machinery, callable from
%% Erlang: seq_trace tokens and serials, trace sessions, breakpoints.
%%
%% These exist for the differential tests (the same scenario runs on the VM
%% and on the model, and both must agree) and for tools that reason about
%% trace data offline. Each model's functions are in their own section.
-module(tracekit_model).

-on_load(init/0).

%% seq_trace model (its functions are in their section below).
-export([seq_new/1, seq_set_tracer/2, seq_add/2, seq_counters/2,
         seq_set_token/3, seq_set_token/4, seq_get_token/2, seq_get_token/3,
         seq_print/3, seq_print/4, seq_send/4, seq_deliver/3, seq_receive/3,
         seq_queue/2, seq_spawn/4, seq_link/3, seq_exit/3, seq_reset/1,
         seq_events/1, seq_send_untokened/2, seq_order_events/1]).
-export_type([seq_world/0, seq_tracer/0, seq_msg_ref/0, seq_order_input/0]).

-nifs([seq_new/1, seq_set_tracer/2, seq_add/2, seq_counters/2,
       seq_set_token/4, seq_set_token_fields/6, seq_get_token/2,
       seq_get_token/3, seq_print/3, seq_print/4, seq_send/4, seq_deliver/3,
       seq_receive/3, seq_queue/2, seq_spawn/4, seq_link/3, seq_exit/3,
       seq_reset/1, seq_events/1, seq_send_untokened/2, seq_order_events/1]).

init() ->
    erlang:load_nif(tracekit_nif:path(?MODULE), 0).

%%% ---- seq_trace model ------------------------------------------------------
%%
%% A world of model processes with seq_trace tokens, clocks and lastcnts,
%% the messages queued for them and the seq_trace events the VM would give
%% the system seq tracer (c_src/core/tk_seq.h has every rule). Processes are
%% named by any term (a test names them by the pids of the processes it runs
%% for real, so that tokens and events compare directly). Operations return
%% what the VM's seq_trace functions return and raise badarg where they do;
%% misuse of the model raises `{no_process, Name}', `{dead_process, Name}',
%% `{no_message, Ref}' or `{already_exists, Name}'.

-opaque seq_world() :: reference().
%% What the system seq tracer does: there is none (serials advance, no
%% events), it answers `trace' (serials advance, events), or it answers
%% anything else (serials do not advance, no events).
-type seq_tracer() :: none | accept | refuse.
-type seq_msg_ref() :: pos_integer().
-type seq_token() :: [] | {non_neg_integer(), term(), integer(), term(), integer()}.
%% One event for {@link seq_order_events/1}: kind, label number, lastcnt,
%% serial, sender number, receiver number (-1 for a print), message number,
%% whether it is the receipt of a spawn_reply.
-type seq_order_input() :: {send | 'receive' | print, non_neg_integer(),
                            integer(), integer(), non_neg_integer(), integer(),
                            non_neg_integer(), boolean()}.

%% @doc A world without processes, with the given system seq tracer.
-spec seq_new(seq_tracer()) -> seq_world().
seq_new(_Tracer) ->
    erlang:nif_error(not_loaded).

%% @doc Changes what the system seq tracer does.
-spec seq_set_tracer(seq_world(), seq_tracer()) -> ok.
seq_set_tracer(_World, _Tracer) ->
    erlang:nif_error(not_loaded).

%% @doc Adds a live process named `Name' without token, clock and lastcnt
%% 0 (a process spawned by one without token).
-spec seq_add(seq_world(), term()) -> ok.
seq_add(_World, _Name) ->
    erlang:nif_error(not_loaded).

%% @doc The process's clock and lastcnt words (64-bit, unsigned). The VM
%% shows them only through the serials they produce.
-spec seq_counters(seq_world(), term()) -> {non_neg_integer(), non_neg_integer()}.
seq_counters(_World, _Name) ->
    erlang:nif_error(not_loaded).

%% @doc `seq_trace:set_token(Token)' run by `Name': `[]' empties the token
%% and returns the previous one; a token tuple sets its label, then its
%% serial (badarg, with the label set, unless both counters are small
%% integers), then its six flags, and returns `ok'. Like seq_trace, a
%% non-integer Flags raises badarith and any other term function_clause.
-spec seq_set_token(seq_world(), term(), seq_token()) -> seq_token() | ok.
seq_set_token(World, Name, []) ->
    seq_set_token(World, Name, sequential_trace_token, []);
seq_set_token(World, Name, {Flags, Label, Serial, _From, LastCnt}) ->
    seq_set_token_fields(World, Name, Flags band 63, Label, Serial, LastCnt).

seq_set_token_fields(_World, _Name, _Flags, _Label, _Serial, _LastCnt) ->
    erlang:nif_error(not_loaded).

%% @doc `seq_trace:set_token(Component, Value)' run by `Name'; returns the
%% previous value.
-spec seq_set_token(seq_world(), term(), atom(), term()) -> term().
seq_set_token(_World, _Name, _Component, _Value) ->
    erlang:nif_error(not_loaded).

%% @doc `seq_trace:get_token()' of `Name'.
-spec seq_get_token(seq_world(), term()) -> seq_token().
seq_get_token(_World, _Name) ->
    erlang:nif_error(not_loaded).

%% @doc `seq_trace:get_token(Component)' of `Name'.
-spec seq_get_token(seq_world(), term(), atom()) -> [] | {atom(), term()}.
seq_get_token(_World, _Name, _Component) ->
    erlang:nif_error(not_loaded).

%% @doc `seq_trace:print(Info)' run by `Name'.
-spec seq_print(seq_world(), term(), term()) -> ok.
seq_print(_World, _Name, _Info) ->
    erlang:nif_error(not_loaded).

%% @doc `seq_trace:print(Label, Info)' run by `Name'.
-spec seq_print(seq_world(), term(), term(), term()) -> ok.
seq_print(_World, _Name, _Label, _Info) ->
    erlang:nif_error(not_loaded).

%% @doc `To ! Msg' run by `From'. Returns the reference of the message now
%% queued for `To', or `none' when `To' is dead (then nothing happens).
-spec seq_send(seq_world(), term(), term(), term()) -> seq_msg_ref() | none.
seq_send(_World, _From, _To, _Msg) ->
    erlang:nif_error(not_loaded).

%% @doc A message that carries no token information (a timer's, a
%% monitor's `DOWN', one sent with {@link seq_send_untokened/2}) reaches
%% `To'.
-spec seq_deliver(seq_world(), term(), term()) -> seq_msg_ref().
seq_deliver(_World, _To, _Msg) ->
    erlang:nif_error(not_loaded).

%% @doc `Name' receives the queued message `Ref'; returns the message.
-spec seq_receive(seq_world(), term(), seq_msg_ref()) -> term().
seq_receive(_World, _Name, _Ref) ->
    erlang:nif_error(not_loaded).

%% @doc The messages queued for `Name', oldest first.
-spec seq_queue(seq_world(), term()) -> [{seq_msg_ref(), term()}].
seq_queue(_World, _Name) ->
    erlang:nif_error(not_loaded).

%% @doc `Parent' spawns a process named `Child' (linked when `Link').
-spec seq_spawn(seq_world(), term(), term(), boolean()) -> ok.
seq_spawn(_World, _Parent, _Child, _Link) ->
    erlang:nif_error(not_loaded).

%% @doc `link(B)' run by `A'.
-spec seq_link(seq_world(), term(), term()) -> ok.
seq_link(_World, _A, _B) ->
    erlang:nif_error(not_loaded).

%% @doc `Name' terminates with `Reason'; its linked processes (which trap
%% exits) get `{'EXIT', Name, Reason}' messages.
-spec seq_exit(seq_world(), term(), term()) -> ok.
seq_exit(_World, _Name, _Reason) ->
    erlang:nif_error(not_loaded).

%% @doc `seq_trace:reset_trace()'.
-spec seq_reset(seq_world()) -> true.
seq_reset(_World) ->
    erlang:nif_error(not_loaded).

%% @doc The events made since the last call, oldest first, as the system
%% tracer gets them except that a timestamp is its kind (`timestamp',
%% `strict_monotonic_timestamp' or `monotonic_timestamp'). A spawn's
%% request and reply show as `{spawn_request, Child}' and
%% `{spawn_reply, Child}'.
-spec seq_events(seq_world()) -> [tuple()].
seq_events(_World) ->
    erlang:nif_error(not_loaded).

%% @doc Sends `Msg' to the local process `Pid' without any seq_trace token
%% information (enif_send without a message environment): the caller's
%% serial does not advance, no event is made, and receiving the message
%% leaves the receiver's token as it is. Returns `false' if `Pid' is dead.
-spec seq_send_untokened(pid(), term()) -> ok | false.
seq_send_untokened(_Pid, _Msg) ->
    erlang:nif_error(not_loaded).

%% @doc Causal order of seq_trace events given with interned terms (see
%% {@link seq_order_input()}): `[{Index, Match}]' in causal order, where
%% Index is an input position and Match the position of the matching send
%% or receive, both 0-based, Match -1 when unmatched. tracekit_seq:order/1
%% is the interface for people.
-spec seq_order_events([seq_order_input()]) -> [{non_neg_integer(), integer()}].
seq_order_events(_Events) ->
    erlang:nif_error(not_loaded).

%%% ---- trace session model --------------------------------------------------

%%% ---- breakpoint model -----------------------------------------------------
