%% @doc The NIFs of tracekit that are not tracer callbacks: the causal
%% ordering of seq_trace events ({@link tracekit_seq:order/1} uses it) and
%% trace files read chunk by chunk ({@link tracekit_file}'s readers use
%% them). Their C is in c_src/nif/tracekit_core.
-module(tracekit_core).

-export([seq_order/1]).
-export([file_open/1, file_next/1, file_resync/1, file_close/1, file_dict/2,
         file_events/3]).

-on_load(init/0).
-nifs([seq_order/1, file_open/1, file_next/1, file_resync/1, file_close/1,
       file_dict/2, file_events/3]).

-opaque reader() :: reference().
-export_type([reader/0]).

init() ->
    erlang:load_nif(tracekit_nif:path(?MODULE), 0).

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

%%% ---- trace files (FORMAT.md) ---------------------------------------------

%% @doc Opens a trace file for reading (its magic is checked).
-spec file_open(binary()) -> {ok, reader()} | {error, atom()}.
file_open(_Path) ->
    erlang:nif_error(not_loaded).

%% @doc The next chunk, `{Type, Payload, Offset}', whose framing and CRC
%% checked out; `eof' at the end; `{corrupt, Offset}' at a chunk that is
%% damaged or cut short (nothing is consumed).
-spec file_next(reader()) -> {pos_integer(), binary(), non_neg_integer()}
                                 | eof | {corrupt, non_neg_integer()}.
file_next(_Reader) ->
    erlang:nif_error(not_loaded).

%% @doc After `{corrupt, _}': moves to the next chunk that checks out.
-spec file_resync(reader()) -> {ok, non_neg_integer()} | eof.
file_resync(_Reader) ->
    erlang:nif_error(not_loaded).

%% @doc Closes the file (also done when the reader is garbage collected).
-spec file_close(reader()) -> ok.
file_close(_Reader) ->
    erlang:nif_error(not_loaded).

%% @doc Appends the entries of a dictionary chunk's payload to the
%% reader's dictionary, all or none: `{error, bad_chunk}' when the chunk
%% is malformed, an entry does not decode, or its first number does not
%% follow the entries so far. The reader keeps the dictionary, so that
%% appending costs time in the chunk's entries only.
-spec file_dict(reader(), binary()) -> ok | {error, bad_chunk | closed}.
file_dict(_Reader, _Payload) ->
    erlang:nif_error(not_loaded).

%% @doc The events of an events chunk's payload, decoded with the reader's
%% dictionary so far, given its machine's reference
%% `{Stamp, SystemNs, StampsPerSecond}': `{[{TimeNs, Stamp, Event}],
%% Undecodable}'. Times of one machine keep the order of its stamps.
-spec file_events(reader(), binary(),
                  {non_neg_integer(), non_neg_integer(), non_neg_integer()}) ->
          {[{integer(), non_neg_integer(), tuple()}], non_neg_integer()}
              | {error, bad_chunk}.
file_events(_Reader, _Payload, _Anchor) ->
    erlang:nif_error(not_loaded).
