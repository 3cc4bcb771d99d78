# cmake -DTAR=kernels.tar -DARCHIVE=libkernels.a -DAR=ar [-DMODEL=name -DOBJCOPY=objcopy] -P gexecKernelArchive.cmake
# The object files of TVM's export_library(".tar") as one static archive (gexec_add_model, gexec_add_relax_model).
get_filename_component(_dir ${ARCHIVE} DIRECTORY)
set(_objects_dir ${_dir}/objects)
file(REMOVE_RECURSE ${_objects_dir})
file(REMOVE ${ARCHIVE})
file(MAKE_DIRECTORY ${_objects_dir})
file(ARCHIVE_EXTRACT INPUT ${TAR} DESTINATION ${_objects_dir})
file(GLOB _objects ${_objects_dir}/*.o)
if(NOT _objects)
  message(FATAL_ERROR "gexec: ${TAR} holds no object files (.o); is it TVM's export_library to a .tar?")
endif()
# -DMODEL=name -DOBJCOPY=objcopy (gexec_add_relax_model): each object's registration call
# renamed to model <name>'s, and the kernels' and library symbols (__tvm_ffi_*) made local
# to the objects, so that several models' objects link into one program.
if(MODEL)
  foreach(_object IN LISTS _objects)
    execute_process(COMMAND ${OBJCOPY} --redefine-sym TVMFFIEnvModRegisterSystemLibSymbol=gexec_relax_register_${MODEL}
                            --wildcard --localize-symbol=__tvm_ffi_* ${_object} RESULT_VARIABLE _rc ERROR_VARIABLE _err)
    if(NOT _rc EQUAL 0)
      message(FATAL_ERROR "gexec: ${OBJCOPY} could not rename the symbols of ${_object} (from ${TAR}): ${_err}")
    endif()
  endforeach()
endif()
execute_process(COMMAND ${AR} qc ${ARCHIVE} ${_objects} RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "gexec: ${AR} could not archive the objects of ${TAR}")
endif()
