#!/usr/bin/env escript
%%! -noshell
%% seq_trace: the serial after spawning with a token.
%%
%% A process with a seq_trace token spawns a child (spawn/1) and then sends
%% it a message. The spawn is traced as the spawn_request {0,1} and the
%% spawn_reply {1,2}; after receiving the reply the parent has lastcnt = 2
%% and clock = 2, so by the documented rules ("the receiver sets its
%% lastcnt to the serial of the message received and its clock to the
%% larger of its clock and that serial"; a send increments the clock) its
%% next send should carry {LastCnt, Serial} = {2,3}.
%%
%% OTP 27 and 29 give {47,48}: 47 = 16 * 2 + 15, the reply serial's small
%% integer tag bits included, as if the parent's lastcnt were set from the
%% tagged term word of the serial (Eterm) rather than from its value
%% (unsigned_val). Run: escript seq_trace_spawn_serial.escript
main(_) ->
    Self = self(),
    Tracer = spawn(fun() -> collect(Self, []) end),
    _ = seq_trace:set_system_tracer(Tracer),
    _ = seq_trace:set_token(label, 1),
    _ = seq_trace:set_token(send, true),
    _ = seq_trace:set_token('receive', true),
    Child = spawn(fun() -> receive hello -> ok end end),
    Child ! hello,
    _ = seq_trace:set_token([]),
    timer:sleep(200),
    Tracer ! {done, self()},
    Events = receive {events, Es} -> Es end,
    io:format("OTP ~s~n", [erlang:system_info(otp_release)]),
    [io:format("  ~-9w ~w ~0p~n", [Kind, Serial, short(Msg)])
     || {seq_trace, 1, {Kind, Serial, _From, _To, Msg}} <- Events],
    Sends = [Serial || {seq_trace, 1, {send, Serial, _, _, hello}} <- Events],
    io:format("the parent's send of hello: ~w, expected {2,3}~n", [Sends]),
    halt(case Sends of [{2, 3}] -> 0; _ -> 1 end).

collect(Owner, Acc) ->
    receive
        {done, Owner} -> Owner ! {events, lists:reverse(Acc)};
        Event -> collect(Owner, [Event | Acc])
    end.

short(Msg) when is_tuple(Msg) -> element(1, Msg);
short(Msg) -> Msg.
