"""Background jobs: the queue in the store, the owner's lock, the job process's context, liveness and the runner."""
