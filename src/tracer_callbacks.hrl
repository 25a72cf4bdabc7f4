%% The erl_tracer callbacks of a tracer module whose NIF library records
%% with a recorder (tracekit_ring, tracekit_file): every event class has
%% its own pair, as the VM looks them up, all NIFs of the library (the
%% first argument is the tag, the second the tracer state). Included after
%% the module's other attributes: it ends them and begins the functions.

%% erl_tracer callbacks, called by the VM.
-export([enabled/3, trace/5,
         enabled_send/3, trace_send/5,
         enabled_receive/3, trace_receive/5,
         enabled_call/3, trace_call/5,
         enabled_procs/3, trace_procs/5,
         enabled_ports/3, trace_ports/5,
         enabled_running_procs/3, trace_running_procs/5,
         enabled_running_ports/3, trace_running_ports/5,
         enabled_garbage_collection/3, trace_garbage_collection/5]).

-nifs([enabled/3, trace/5, enabled_send/3, trace_send/5,
       enabled_receive/3, trace_receive/5, enabled_call/3, trace_call/5,
       enabled_procs/3, trace_procs/5, enabled_ports/3, trace_ports/5,
       enabled_running_procs/3, trace_running_procs/5,
       enabled_running_ports/3, trace_running_ports/5,
       enabled_garbage_collection/3, trace_garbage_collection/5]).

%% @private
enabled(_Tag, _State, _Tracee) -> erlang:nif_error(not_loaded).
%% @private
trace(_Tag, _State, _Tracee, _Term, _Opts) -> erlang:nif_error(not_loaded).
%% @private
enabled_send(_Tag, _State, _Tracee) -> erlang:nif_error(not_loaded).
%% @private
trace_send(_Tag, _State, _Tracee, _Term, _Opts) -> erlang:nif_error(not_loaded).
%% @private
enabled_receive(_Tag, _State, _Tracee) -> erlang:nif_error(not_loaded).
%% @private
trace_receive(_Tag, _State, _Tracee, _Term, _Opts) -> erlang:nif_error(not_loaded).
%% @private
enabled_call(_Tag, _State, _Tracee) -> erlang:nif_error(not_loaded).
%% @private
trace_call(_Tag, _State, _Tracee, _Term, _Opts) -> erlang:nif_error(not_loaded).
%% @private
enabled_procs(_Tag, _State, _Tracee) -> erlang:nif_error(not_loaded).
%% @private
trace_procs(_Tag, _State, _Tracee, _Term, _Opts) -> erlang:nif_error(not_loaded).
%% @private
enabled_ports(_Tag, _State, _Tracee) -> erlang:nif_error(not_loaded).
%% @private
trace_ports(_Tag, _State, _Tracee, _Term, _Opts) -> erlang:nif_error(not_loaded).
%% @private
enabled_running_procs(_Tag, _State, _Tracee) -> erlang:nif_error(not_loaded).
%% @private
trace_running_procs(_Tag, _State, _Tracee, _Term, _Opts) -> erlang:nif_error(not_loaded).
%% @private
enabled_running_ports(_Tag, _State, _Tracee) -> erlang:nif_error(not_loaded).
%% @private
trace_running_ports(_Tag, _State, _Tracee, _Term, _Opts) -> erlang:nif_error(not_loaded).
%% @private
enabled_garbage_collection(_Tag, _State, _Tracee) -> erlang:nif_error(not_loaded).
%% @private
trace_garbage_collection(_Tag, _State, _Tracee, _Term, _Opts) -> erlang:nif_error(not_loaded).
