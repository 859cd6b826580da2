#pragma once
// Private to runtime/config: the elasticity section reader shared by parseConfig (the section
// inside a full config) and parseElasticitySection (DEEPSPEED_ELASTICITY_CONFIG).

#include "runtime/config/elasticity_config.hpp"
#include "runtime/config/json_reader.hpp"

namespace stretch::config::detail {

// Validates the section in DeepSpeed's order (ElasticityConfig.__init__, then the version checks
// of compute_elastic_config) and reports its unknown keys. The reader should use
// ErrorKind::Elasticity so that every problem is an ElasticityConfigError.
ElasticityConfig readElasticity(const json::ObjectReader& reader);

}  // namespace stretch::config::detail
