# train: options, the training loop and its step graph, evaluation, checkpoints (the full training state) and
# model files (--save-model, --load-model), the run's reports and the replicas' agreement.
src_libmnistddp_a_SOURCES += src/train/options.c src/train/options.h src/train/train.c src/train/train.h \
	src/train/train_run.h src/train/train_report.c src/train/replicas.c src/train/replicas.h \
	src/train/step_graph.c src/train/step_graph.h \
	src/train/evaluate.c src/train/evaluate.h src/train/model_file.c src/train/model_file.h \
	src/train/checkpoint.c src/train/checkpoint.h
